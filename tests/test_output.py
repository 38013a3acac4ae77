"""Every output (each export format, the files export, the WARC export, the report) goes through one
atomic writer (scraper.products.output): a folder that does not exist or cannot be written is one sentence
and exit 2, with nothing left behind; so is a new database in a folder that cannot be written (issue 32)."""

import os
import tempfile

import pytest

from tests.helpers import assert_one_sentence_error, invoke, served_mirror


def unwritable_folder(tmp_path):
    """A folder nobody here may create a file in: a read-only one, or /sys when root ignores modes."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return str(folder)
    return "/sys"        # root writes anywhere but in sysfs


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("mirror") / "jobs.db"
    served_mirror(str(path))
    return path


OUTPUTS = {
    "jsonl": ["export", "--format", "jsonl", "--output", "{}/x.jsonl"],
    "json": ["export", "--format", "json", "--output", "{}/x.json"],
    "csv": ["export", "--format", "csv", "--output", "{}/x.csv"],
    "parquet": ["export", "--format", "parquet", "--output", "{}/x.parquet"],
    "warc": ["export", "--format", "warc", "--output", "{}/x.warc.gz"],
    "files": ["export", "--format", "files", "--output", "{}/templates"],
    "report": ["report", "--output", "{}/report.html"],
}


@pytest.mark.parametrize("kind", OUTPUTS)
def test_an_output_into_a_folder_that_cannot_be_written_is_one_sentence(db, tmp_path, kind):
    folder = unwritable_folder(tmp_path)
    before = sorted(os.listdir(folder))
    result = invoke(*(a.format(folder) for a in OUTPUTS[kind]), db=db)
    assert_one_sentence_error(result, folder, "cannot be")
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("kind", [k for k in OUTPUTS if k != "files"])    # files makes its folder
def test_an_output_into_a_folder_that_does_not_exist_is_one_sentence(db, tmp_path, kind):
    folder = str(tmp_path / "no" / "such")
    result = invoke(*(a.format(folder) for a in OUTPUTS[kind]), db=db)
    assert_one_sentence_error(result, folder, "does not exist")
    assert not os.path.exists(tmp_path / "no")


def test_the_files_export_under_a_file_is_one_sentence(db, tmp_path):
    (tmp_path / "plain").write_text("x")
    result = invoke("export", "--format", "files", "--output", str(tmp_path / "plain" / "templates"), db=db)
    assert_one_sentence_error(result, str(tmp_path / "plain"))


@pytest.mark.parametrize("command", ["seed", "update"])
def test_a_new_database_in_a_folder_that_cannot_be_written_is_one_sentence(tmp_path, command):
    folder = unwritable_folder(tmp_path)
    result = invoke(command, db=os.path.join(folder, "jobs.db"))
    assert_one_sentence_error(result, folder, "cannot be written")
    assert not os.path.exists(os.path.join(folder, "jobs.db"))


def test_a_written_output_is_an_ordinary_file_and_nothing_else_is_left(db, tmp_path):
    result = invoke("export", "--format", "jsonl", "--output", str(tmp_path / "x.jsonl"), db=db)
    assert result.exit_code == 0, result.output
    assert os.listdir(tmp_path) == ["x.jsonl"]
    assert (tmp_path / "x.jsonl").stat().st_mode & 0o644 == 0o644
