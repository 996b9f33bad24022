"""Time expressions in a query, one table per language, against a fixed now: Wednesday 18 March 2026,
15:00 UTC. Each row: the query, the first and last day of the range (None: the range runs to now),
and the query left once the expression is cut out."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from clawrecall.retrieval.when import find

NOW = datetime(2026, 3, 18, 15, 0, tzinfo=timezone.utc)
D = date

ENGLISH = [
    ("what did I eat today?", D(2026, 3, 18), D(2026, 3, 18), "what did I eat?"),
    ("what did I eat yesterday?", D(2026, 3, 17), D(2026, 3, 17), "what did I eat?"),
    ("the day before yesterday we rode", D(2026, 3, 16), D(2026, 3, 16), "we rode"),
    ("day before yesterday", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("meetings last week", D(2026, 3, 9), D(2026, 3, 15), "meetings"),
    ("what did we talk about this morning?", D(2026, 3, 18), D(2026, 3, 18), "what did we talk about?"),
    ("emails tonight", D(2026, 3, 18), D(2026, 3, 18), "emails"),
    ("what happened last night", D(2026, 3, 17), D(2026, 3, 17), "what happened"),
    ("what did we discuss in the last 7 days?", D(2026, 3, 11), D(2026, 3, 18), "what did we discuss?"),
    ("gym over the past two weeks", D(2026, 3, 4), D(2026, 3, 18), "gym"),
    ("rent in the last 3 months", D(2025, 12, 18), D(2026, 3, 18), "rent"),
    ("pay rises over the last 2 years", D(2024, 3, 18), D(2026, 3, 18), "pay rises"),
    ("the last 2 days of the trip were rainy", None, None, None),
    ("meetings this week", D(2026, 3, 16), D(2026, 3, 22), "meetings"),
    ("rides last month", D(2026, 2, 1), D(2026, 2, 28), "rides"),
    ("rides this month", D(2026, 3, 1), D(2026, 3, 31), "rides"),
    ("trips last year", D(2025, 1, 1), D(2025, 12, 31), "trips"),
    ("trips this year", D(2026, 1, 1), D(2026, 12, 31), "trips"),
    ("where did we go in May?", D(2025, 5, 1), D(2025, 5, 31), "where did we go?"),  # the latest May
    ("what happened in March", D(2026, 3, 1), D(2026, 3, 31), "what happened"),  # this month counts
    ("budget in May 2024", D(2024, 5, 1), D(2024, 5, 31), "budget"),
    ("budget May 2024", D(2024, 5, 1), D(2024, 5, 31), "budget"),
    ("plans during December", D(2025, 12, 1), D(2025, 12, 31), "plans"),
    ("what happened 3 days ago", D(2026, 3, 15), D(2026, 3, 15), "what happened"),
    ("what happened a week ago", D(2026, 3, 9), D(2026, 3, 15), "what happened"),
    ("two weeks ago", D(2026, 3, 2), D(2026, 3, 8), ""),
    ("2 months ago", D(2026, 1, 1), D(2026, 1, 31), ""),
    ("one year ago", D(2025, 1, 1), D(2025, 12, 31), ""),
    ("what did Bob say on Monday", D(2026, 3, 16), D(2026, 3, 16), "what did Bob say"),
    ("on Wednesday", D(2026, 3, 18), D(2026, 3, 18), ""),  # today is one
    ("last Friday's talk", D(2026, 3, 13), D(2026, 3, 13), "talk"),
    ("last Friday", D(2026, 3, 13), D(2026, 3, 13), ""),
    ("since Monday", D(2026, 3, 16), None, ""),
    ("changes since 2026-01-05", D(2026, 1, 5), None, "changes"),
    ("since May", D(2025, 5, 1), None, ""),
    ("notes from 2025-11-02", D(2025, 11, 2), D(2025, 11, 2), "notes from"),
    ("on 2025-11-02", D(2025, 11, 2), D(2025, 11, 2), ""),
    ("invoices 2025-11", D(2025, 11, 1), D(2025, 11, 30), "invoices"),
    ("in 2024", D(2024, 1, 1), D(2024, 12, 31), ""),
    ("what may I eat", None, None, None),  # "may" alone is a verb
    ("march on", None, None, None),
    ("2025-02-30", None, None, None),  # no such day
    ("version 2.0-2025", None, None, None),
]

CZECH = [
    ("co jsme probírali za posledních 7 dní", D(2026, 3, 11), D(2026, 3, 18), "co jsme probírali"),
    ("za poslední 3 dny", D(2026, 3, 15), D(2026, 3, 18), ""),
    ("poslední dva týdny", D(2026, 3, 4), D(2026, 3, 18), ""),
    ("co jsem jedl dnes", D(2026, 3, 18), D(2026, 3, 18), "co jsem jedl"),
    ("co jsem jedl dneska?", D(2026, 3, 18), D(2026, 3, 18), "co jsem jedl?"),
    ("co jsme dělali včera", D(2026, 3, 17), D(2026, 3, 17), "co jsme dělali"),
    ("předevčírem", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("schůzky minulý týden", D(2026, 3, 9), D(2026, 3, 15), "schůzky"),
    ("co se stalo v minulém týdnu", D(2026, 3, 9), D(2026, 3, 15), "co se stalo"),
    ("tento týden", D(2026, 3, 16), D(2026, 3, 22), ""),
    ("v tomto týdnu", D(2026, 3, 16), D(2026, 3, 22), ""),
    ("minulý měsíc", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("v minulém měsíci", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("tento měsíc", D(2026, 3, 1), D(2026, 3, 31), ""),
    ("minulý rok", D(2025, 1, 1), D(2025, 12, 31), ""),
    ("kam jsme jeli loni", D(2025, 1, 1), D(2025, 12, 31), "kam jsme jeli"),
    ("letos", D(2026, 1, 1), D(2026, 12, 31), ""),
    ("kam jsme jeli v květnu", D(2025, 5, 1), D(2025, 5, 31), "kam jsme jeli"),
    ("v květnu 2024", D(2024, 5, 1), D(2024, 5, 31), ""),
    ("květen", D(2025, 5, 1), D(2025, 5, 31), ""),
    ("v červnu", D(2025, 6, 1), D(2025, 6, 30), ""),
    ("v červenci", D(2025, 7, 1), D(2025, 7, 31), ""),
    ("v září", D(2025, 9, 1), D(2025, 9, 30), ""),
    ("v prosinci", D(2025, 12, 1), D(2025, 12, 31), ""),
    ("v únoru", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("v roce 2024", D(2024, 1, 1), D(2024, 12, 31), ""),
    ("před 3 dny", D(2026, 3, 15), D(2026, 3, 15), ""),
    ("před týdnem", D(2026, 3, 9), D(2026, 3, 15), ""),
    ("před dvěma týdny", D(2026, 3, 2), D(2026, 3, 8), ""),
    ("před měsícem", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("před rokem", D(2025, 1, 1), D(2025, 12, 31), ""),
    ("v pondělí", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("ve čtvrtek", D(2026, 3, 12), D(2026, 3, 12), ""),
    ("v pátek", D(2026, 3, 13), D(2026, 3, 13), ""),
    ("v sobotu", D(2026, 3, 14), D(2026, 3, 14), ""),
    ("v neděli", D(2026, 3, 15), D(2026, 3, 15), ""),
    ("od května", D(2025, 5, 1), None, ""),
    ("od pondělí", D(2026, 3, 16), None, ""),
    ("od včerejška", D(2026, 3, 17), None, ""),
    ("od 2026-01-05", D(2026, 1, 5), None, ""),
    ("červená kola", None, None, None),  # red, not June
    ("od Petra", None, None, None),
]

RUSSIAN = [
    ("о чём мы говорили за последние 5 дней", D(2026, 3, 13), D(2026, 3, 18), "о чём мы говорили"),
    ("за последние 3 дня", D(2026, 3, 15), D(2026, 3, 18), ""),
    ("что я ел сегодня", D(2026, 3, 18), D(2026, 3, 18), "что я ел"),
    ("что я ел вчера?", D(2026, 3, 17), D(2026, 3, 17), "что я ел?"),
    ("позавчера", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("встречи на прошлой неделе", D(2026, 3, 9), D(2026, 3, 15), "встречи"),
    ("прошлая неделя", D(2026, 3, 9), D(2026, 3, 15), ""),
    ("на этой неделе", D(2026, 3, 16), D(2026, 3, 22), ""),
    ("в прошлом месяце", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("в этом месяце", D(2026, 3, 1), D(2026, 3, 31), ""),
    ("в прошлом году", D(2025, 1, 1), D(2025, 12, 31), ""),
    ("в этом году", D(2026, 1, 1), D(2026, 12, 31), ""),
    ("куда мы ездили в мае", D(2025, 5, 1), D(2025, 5, 31), "куда мы ездили"),
    ("в мае 2025", D(2025, 5, 1), D(2025, 5, 31), ""),
    ("в мае 2024 года", D(2024, 5, 1), D(2024, 5, 31), ""),
    ("май", D(2025, 5, 1), D(2025, 5, 31), ""),
    ("в январе", D(2026, 1, 1), D(2026, 1, 31), ""),
    ("в сентябре", D(2025, 9, 1), D(2025, 9, 30), ""),
    ("в марте", D(2026, 3, 1), D(2026, 3, 31), ""),
    ("в 2024 году", D(2024, 1, 1), D(2024, 12, 31), ""),
    ("3 дня назад", D(2026, 3, 15), D(2026, 3, 15), ""),
    ("два дня назад", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("неделю назад", D(2026, 3, 9), D(2026, 3, 15), ""),
    ("2 недели назад", D(2026, 3, 2), D(2026, 3, 8), ""),
    ("месяц назад", D(2026, 2, 1), D(2026, 2, 28), ""),
    ("год назад", D(2025, 1, 1), D(2025, 12, 31), ""),
    ("в понедельник", D(2026, 3, 16), D(2026, 3, 16), ""),
    ("во вторник", D(2026, 3, 17), D(2026, 3, 17), ""),
    ("в среду", D(2026, 3, 18), D(2026, 3, 18), ""),
    ("в пятницу", D(2026, 3, 13), D(2026, 3, 13), ""),
    ("в воскресенье", D(2026, 3, 15), D(2026, 3, 15), ""),
    ("с мая", D(2025, 5, 1), None, ""),
    ("со среды", D(2026, 3, 18), None, ""),
    ("с понедельника", D(2026, 3, 16), None, ""),
    ("кофе с молоком", None, None, None),
    ("мама", None, None, None),
]


def _rows(table):
    return [pytest.param(*row, id=row[0]) for row in table]


@pytest.mark.parametrize(("query", "first", "last", "rest"), _rows(ENGLISH) + _rows(CZECH) + _rows(RUSSIAN))
def test_a_time_expression_becomes_a_range_and_leaves_the_rest_of_the_query(query, first, last, rest):
    found = find(query, NOW)
    if first is None:
        assert found is None
        return
    assert found is not None
    assert found.start == datetime(first.year, first.month, first.day, tzinfo=timezone.utc)
    if last is None:  # "since …": up to now
        assert found.end == NOW
    else:
        assert found.end == datetime(last.year, last.month, last.day, tzinfo=timezone.utc) + timedelta(days=1)
    assert found.query == rest


def test_the_range_is_relative_to_the_now_given():
    found = find("yesterday", datetime(2025, 1, 1, 0, 30, tzinfo=timezone.utc))
    assert found is not None and (found.start.date(), found.end.date()) == (D(2024, 12, 31), D(2025, 1, 1))
    assert datetime(2024, 12, 31, 23, 59, tzinfo=timezone.utc) in found
    assert datetime(2025, 1, 1, tzinfo=timezone.utc) not in found


def test_a_long_prompt_is_read_around_the_words_that_can_start_an_expression():
    filler = "Please refactor the parser so that it reports the position of every error. " * 40
    assert find(filler, NOW) is None
    found = find(filler + "What did we decide v minulém týdnu?", NOW)
    assert found is not None and found.text == "v minulém týdnu" and found.query.endswith("What did we decide?")


@pytest.mark.parametrize(("query", "no_topic"), [
    ("yesterday", True),
    ("What did we talk about yesterday?", True),
    ("what did I say last week", True),
    ("anything new since Monday?", True),
    ("co jsme dělali včera", True),
    ("о чём мы говорили вчера", True),
    ("what happened yesterday?", True),
    ("what did we do yesterday", True),
    ("what were we doing this morning?", True),
    ("what did we decide last night?", True),
    ("what's new today?", True),
    ("что было вчера", True),
    ("co jsme řešili včera", True),
    ("co bylo včera", True),
    ("What should I do today?", False),
    ("I'm new here today", False),
    ("recap of last week", True),
    ("What did Carol say yesterday?", False),
    ("How are you today?", False),  # stopwords alone ask about no record
    ("I did it yesterday", False),
    ("Was it yesterday?", False),
    ("dinner with Carol yesterday", False),
    ("kde jsme byli na večeři včera", False),
    ("куда мы ездили в мае", False),
])
def test_a_query_whose_other_words_name_no_topic_asks_for_the_time_itself(query, no_topic):
    found = find(query, NOW)
    assert found is not None and found.names_no_topic is no_topic
