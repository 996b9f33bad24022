"""A conversation's open segment closes where the topic shifts, with the default window and threshold
(measured by bench/segments.py), once the backfill has given its messages vectors; a conversation
that stays on one topic stays in one segment. Most texts are built so that the test embedder (words,
not meaning) separates the topics as the local model separates real ones; the last tests are a real
chat embedded by the local model, whose cosine scale the defaults were measured on."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from clawrecall import Caller
from clawrecall.conversations.segments import topic_shift

GARDEN = "tomato garden compost watering seedlings mulch soil harvest".split()
CARS = "engine brakes mechanic gearbox tyres exhaust battery clutch".split()
BIRDS = "sparrow heron feather migration nest binoculars warbler plumage".split()
CALLER = Caller(user_id="u1")
START = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


TAXES = [
    "Can I deduct my home office on this year's tax return?",
    "If you are self-employed and the room is used only for work, yes; employees usually cannot.",
    "I'm a freelancer and the spare bedroom is my office.",
    "Then measure its share of the flat's floor area; that share of rent and utilities is deductible.",
    "Do I need receipts for the electricity bills?",
    "Keep the bills and the rental contract for the tax office, in case they ask.",
    "What about the new laptop I bought for work?",
    "Equipment used for the business is deductible too, spread over its useful life if it is expensive.",
]
MORE_TAXES = [
    "When is the deadline for filing the return?",
    "The end of July for most people, later if a tax adviser files it for you.",
    "And if I file late?",
    "The tax office can charge a late-filing surcharge, so ask for an extension before the deadline.",
    "Should I pay quarterly advance payments as a freelancer?",
    "Yes, the tax office sets advance payments from last year's profit; you can ask to lower them.",
    "How much should I set aside from each invoice?",
    "Putting aside about a third of each invoice usually covers income tax and the advance payments.",
]
HIKE = [
    "We're planning a hike in the Alps next weekend. Which trail would you suggest?",
    "The ridge trail above the lake is beautiful; it takes about six hours with a mountain hut halfway.",
    "Is it safe if there is still snow near the summit?",
    "Bring microspikes and turn back if the path is icy; check the avalanche report the day before.",
    "What should we pack for the day?",
    "Water, a warm layer, a rain jacket, sun cream and snacks; the hut sells lunch.",
    "Can we bring our dog on the trail?",
    "Dogs are allowed on a leash, but the last steep section has ladders a dog cannot climb.",
]


def talk(*topics: list[str], turns: int = 6) -> list[dict]:
    """`turns` user/assistant exchanges on each topic, 30 s apart; each message five of the topic's words."""
    return chat([" ".join(words[(k + j) % len(words)] for j in range(5)) for words in topics for k in range(2 * turns)])


def chat(texts: list[str]) -> list[dict]:
    """The texts as alternating user and assistant messages, 30 s apart."""
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": text, "timestamp": (START + timedelta(seconds=30 * n)).isoformat()}
        for n, text in enumerate(texts)
    ]


def segments_after_backfill(mem, messages: list[dict]) -> list[tuple[int, str | None]]:
    """Log the transcript, embed it; each segment's first message (its position) and why it closed."""
    mem.conversations.log(messages, caller=CALLER, session_id="s1")
    mem.upkeep.runtime.drain()  # the write's own background backfill, then ours for anything left
    mem.upkeep.backfill()
    mem.upkeep.runtime.drain()
    stored = mem.conversations.show("s1", caller=CALLER)
    first = {}
    for position, message in enumerate(stored):
        first.setdefault(message.segment_id, position)
    reasons = {s.id: s.close_reason for s in mem.conversations.segments(caller=CALLER, session_id="s1")}
    return sorted((first[s], reasons[s]) for s in first)


def test_a_spliced_conversation_is_split_at_the_junction(mem):
    assert segments_after_backfill(mem, talk(GARDEN, CARS)) == [(0, "topic"), (12, None)]


def test_every_shift_in_one_backfill_is_split(mem):
    assert segments_after_backfill(mem, talk(GARDEN, CARS, BIRDS)) == [(0, "topic"), (12, "topic"), (24, None)]


def test_a_conversation_on_one_topic_stays_one_segment(mem):
    assert segments_after_backfill(mem, talk(GARDEN, turns=12)) == [(0, None)]


def test_the_cut_is_at_the_lowest_point_of_the_dip_not_at_the_window_that_straddles_it():
    """Window 4 over 8 messages of one topic then 8 of another: the position two messages early already
    dips (cosine 0.71, half its window is the new topic); the junction dips to 0."""
    a, b = np.eye(2, dtype=np.float32)
    vectors = np.array([a] * 8 + [b] * 8)
    user = [n % 2 == 0 for n in range(16)]
    assert topic_shift(vectors, user, 4, 0.75) == 8
    assert topic_shift(vectors[:10], user[:10], 4, 0.75) is None  # the junction's window is not complete yet
    assert topic_shift(vectors[:13], user[:13], 4, 0.75) is None  # nor the next position's: the dip may go lower
    assert topic_shift(vectors[:14], user[:14], 4, 0.75) == 8


@pytest.mark.model
def test_a_real_chat_that_turns_to_something_else_is_split_at_the_turn(mem):
    """Taxes, then a hike: the window straddling the turn dips to ~0.26, the turn itself to ~0.05."""
    assert segments_after_backfill(mem, chat(TAXES + HIKE)) == [(0, "topic"), (8, None)]


@pytest.mark.model
def test_a_real_chat_on_one_subject_is_not_split(mem):
    """Its window cosines stay at 0.4-0.6 while it moves from deductions to deadlines and advance payments."""
    assert segments_after_backfill(mem, chat(TAXES + MORE_TAXES)) == [(0, None)]
