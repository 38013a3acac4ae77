"""Property tests (hypothesis) of policy/sessions: what the picker of remote browser sessions always does."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scraper.policy import sessions as ps

FAST = settings(max_examples=80, deadline=None)

domains = st.sampled_from(["a.test", "b.test", "c.test", "d.test"])


@st.composite
def session_sets(draw):
    """Up to 6 sessions with distinct ids, each in any state a pool can hold."""
    ids = draw(st.lists(st.text("abcdef0123", min_size=1, max_size=4), unique=True, max_size=6))
    out = []
    for sid in ids:
        capacity = draw(st.integers(1, 3))
        out.append(ps.Session(sid, healthy=draw(st.booleans()), active=draw(st.integers(0, capacity)),
                              capacity=capacity, pages=draw(st.integers(0, 12)),
                              domains=frozenset(draw(st.sets(domains, max_size=3)))))
    return out


picks = st.fixed_dictionaries({
    "domain": domains, "sessions": session_sets(), "max_sessions": st.integers(1, 8),
    "session_pages": st.integers(1, 12), "strategy": st.sampled_from(ps.STRATEGIES), "cap": st.integers(1, 4),
    "turn": st.integers(0, 50)})


def after(case, answer):
    """The sessions once the page is placed as `answer` says (a NEW session serves its domain)."""
    out = [dataclasses.replace(s, active=s.active + 1, domains=s.domains | {case["domain"]})
           if s.id == answer else s for s in case["sessions"]]
    if answer == ps.NEW:
        out.append(ps.Session("new", active=1, domains=frozenset({case["domain"]})))
    return out


@FAST
@given(case=picks)
def test_a_picked_session_is_healthy_not_full_and_not_done_with_its_pages(case):
    answer = ps.pick(**case)
    chosen = {s.id: s for s in case["sessions"]}.get(answer)
    if answer in (ps.NEW, ps.WAIT):
        return
    assert chosen is not None
    assert chosen.healthy and chosen.active < chosen.capacity
    assert chosen.pages + chosen.active < case["session_pages"]


@FAST
@given(case=picks)
def test_no_session_is_asked_for_past_max_sessions(case):
    if ps.pick(**case) == ps.NEW:
        assert len(case["sessions"]) < case["max_sessions"]


@FAST
@given(case=picks)
def test_a_domain_is_never_spread_over_more_sessions_than_its_cap(case):
    serving = lambda sessions: sum(case["domain"] in s.domains for s in sessions)  # noqa: E731 - one line
    before = serving(case["sessions"])
    assert serving(after(case, ps.pick(**case))) <= max(before, case["cap"])


@FAST
@given(case=picks)
def test_it_waits_only_when_nothing_may_take_the_page(case):
    answer = ps.pick(**case)
    serving = [s for s in case["sessions"] if case["domain"] in s.domains]
    pool = serving if len(serving) >= case["cap"] else case["sessions"]
    can_take = any(ps.takes_page(s, case["session_pages"]) for s in pool)
    may_open = len(case["sessions"]) < case["max_sessions"] and len(serving) < case["cap"]
    assert (answer == ps.WAIT) == (not can_take and not may_open)
    # an existing session is used before a new one is asked for
    assert (answer == ps.NEW) == (not can_take and may_open)


def free_in_pool(case):
    """The sessions that may take the page: the domain's own once it is at its cap, else any; by id."""
    serving = [s for s in case["sessions"] if case["domain"] in s.domains]
    pool = serving if len(serving) >= case["cap"] else case["sessions"]
    return sorted((s for s in pool if ps.takes_page(s, case["session_pages"])), key=lambda s: s.id)


@FAST
@given(case=picks)
def test_least_loaded_takes_a_session_with_the_lowest_load(case):
    case = {**case, "strategy": "least-loaded"}
    free = free_in_pool(case)
    answer = ps.pick(**case)
    if not free:
        assert answer in (ps.NEW, ps.WAIT)
        return
    chosen = next(s for s in free if s.id == answer)
    assert chosen.active / chosen.capacity == min(s.active / s.capacity for s in free)


@FAST
@given(case=picks)
def test_round_robin_hands_each_free_session_one_page_in_as_many_turns(case):
    case = {**case, "strategy": "round-robin"}
    free = [s.id for s in free_in_pool(case)]
    answers = [ps.pick(**{**case, "turn": case["turn"] + t}) for t in range(len(free))]
    assert sorted(answers) == free


@FAST
@given(domain=domains, sessions=session_sets(), gone=st.integers(0, 5), session_pages=st.integers(1, 12))
def test_domain_affinity_keeps_a_domain_on_its_session_when_another_one_goes(domain, sessions, gone, session_pages):
    case = {"domain": domain, "max_sessions": 8, "session_pages": session_pages, "strategy": "domain-affinity",
            "cap": 8}
    first = ps.pick(sessions=sessions, **case)
    others = [s for s in sessions if s.id != first]
    if first in (ps.NEW, ps.WAIT) or not others:
        return
    removed = others[gone % len(others)]
    assert ps.pick(sessions=[s for s in sessions if s is not removed], **case) == first


@FAST
@given(domain=domains, ids=st.lists(st.text("xyz", min_size=1, max_size=3), unique=True, min_size=2, max_size=6))
def test_domain_affinity_spreads_by_weight_not_by_order(domain, ids):
    sessions = [ps.Session(i) for i in ids]
    case = {"domain": domain, "max_sessions": 8, "session_pages": 5, "strategy": "domain-affinity", "cap": 8}
    assert ps.pick(sessions=sessions, **case) == ps.pick(sessions=list(reversed(sessions)), **case) \
        == max(ids, key=lambda i: ps.weight(domain, i))


@FAST
@given(rate=st.floats(0.01, 100), page_s=st.floats(0.1, 60), k=st.floats(1, 50), more=st.floats(1, 10))
def test_domain_cap_is_at_least_one_and_grows_with_rate_and_page_time(rate, page_s, k, more):
    cap = ps.domain_cap(rate, page_s, k)
    assert cap >= 1
    assert cap >= rate * page_s / k - 1e-6
    assert ps.domain_cap(rate * more, page_s, k) >= cap
    assert ps.domain_cap(rate, page_s * more, k) >= cap
    assert cap <= max(1, math.ceil(rate * page_s / k))


def test_domain_cap_of_the_notes_example():
    # 2 requests/s, 8 requests a page, 6 s a page: 1.5 pages in flight, so 2 sessions
    assert ps.domain_cap(2.0, 6.0, 8) == 2
    assert ps.domain_cap(0.5, 1.0, 4) == 1


def test_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy"):
        ps.pick("a.test", [], max_sessions=1, session_pages=1, strategy="random", cap=1)


@FAST
@given(case=picks, data=st.data())
def test_a_callers_own_session_is_the_answer_whenever_it_may_take_the_page(case, data):
    """A worker renders on its own session only: it gets it whenever the picker would let any caller have it,
    and otherwise the same answer as a caller without a session of its own."""
    ids = [s.id for s in case["sessions"]]
    own = data.draw(st.sampled_from(ids)) if ids else None
    anyone = ps.pick(**case)
    mine = ps.pick(**case, own=own)
    may = any(ps.pick(**{**case, "strategy": strategy, "turn": turn}) == own
              for strategy in ps.STRATEGIES for turn in range(len(ids)))
    assert (mine == own) == may
    if mine != own:
        assert mine == anyone
