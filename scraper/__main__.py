from scraper.cli import main

main(prog_name="scraper")
