"""A fixed set of short texts (code and prose) for reports and benchmarks.

Each is about 100-200 tokens with the Qwen2.5 tokenizer, written for this toolkit (no
licensed material), and never changes: numbers measured on them are comparable across
runs. Code texts are where a coder draft agrees most with its target (docs/models.md:
mean ``sum min(p, q)`` about 0.88 on code, 0.66 on prose for the Qwen2.5-Coder pair).
"""
from __future__ import annotations

from dataclasses import dataclass

from otm.errors import UnknownNameError


@dataclass(frozen=True)
class BuiltinText:
    name: str
    kind: str  # "code" or "prose"
    text: str


BUILTIN_TEXTS: tuple[BuiltinText, ...] = (
    BuiltinText(
        "binary_search",
        "code",
        '''def binary_search(items, target):
    """Return the index of target in the sorted list items, or -1 if it is absent."""
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1


if __name__ == "__main__":
    numbers = [1, 3, 5, 7, 9, 11]
    print(binary_search(numbers, 7))
    print(binary_search(numbers, 4))
''',
    ),
    BuiltinText(
        "stack_class",
        "code",
        '''class Stack:
    """A last-in, first-out container backed by a Python list."""

    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty stack")
        return self._items.pop()

    def peek(self):
        if not self._items:
            raise IndexError("peek at an empty stack")
        return self._items[-1]

    def __len__(self):
        return len(self._items)

    def is_empty(self):
        return len(self._items) == 0
''',
    ),
    BuiltinText(
        "word_count",
        "code",
        '''import collections
import sys


def count_words(path):
    """Count how often each word occurs in a text file, ignoring case."""
    counts = collections.Counter()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            for word in line.lower().split():
                word = word.strip(".,;:!?\\"'()")
                if word:
                    counts[word] += 1
    return counts


def main():
    counts = count_words(sys.argv[1])
    for word, number in counts.most_common(10):
        print(f"{word}: {number}")


if __name__ == "__main__":
    main()
''',
    ),
    BuiltinText(
        "river_town",
        "prose",
        "The town grew up on both banks of a slow river, and for most of its history the "
        "only way across was a wooden ferry that ran from dawn until the light failed. "
        "Farmers brought grain to the mill on the east side, while the market, the church "
        "and the school stood on the west. When the first stone bridge was finished, people "
        "expected the ferry to disappear within a year. Instead it carried passengers for "
        "another three decades, because the old ferryman knew everyone by name and told the "
        "news of the valley better than any newspaper could.",
    ),
    BuiltinText(
        "bread_recipe",
        "prose",
        "To bake a simple loaf of bread, mix five hundred grams of flour with ten grams of "
        "salt and seven grams of dried yeast. Add about three hundred and fifty millilitres "
        "of warm water and stir until no dry flour remains. Knead the dough on a floured "
        "table for ten minutes, until it feels smooth and springs back when pressed. Cover "
        "the bowl and leave it in a warm place for an hour, or until the dough has doubled "
        "in size. Shape it into a loaf, let it rise again, and bake it in a hot oven for "
        "thirty-five minutes, until the crust is brown and the bottom sounds hollow.",
    ),
    BuiltinText(
        "speculative_decoding",
        "prose",
        "Large language models generate text one token at a time, and each step needs a full "
        "pass through billions of parameters. Speculative decoding reduces the waiting time "
        "by letting a small draft model propose several tokens ahead. The large target model "
        "then checks all of the proposals in a single parallel pass and keeps the longest "
        "prefix that it agrees with. A careful acceptance rule guarantees that the final text "
        "follows exactly the same distribution as if the target model had produced it alone, "
        "so the speed-up comes without any loss of quality.",
    ),
)

TEXT_KINDS = ("code", "prose")


def builtin_texts(kind: str | None = None) -> list[BuiltinText]:
    """The built-in texts, all of them or only those of ``kind`` ("code" or "prose")."""
    if kind is None:
        return list(BUILTIN_TEXTS)
    if kind not in TEXT_KINDS:
        raise UnknownNameError(f"unknown text kind {kind!r}; choose one of {TEXT_KINDS}")
    return [entry for entry in BUILTIN_TEXTS if entry.kind == kind]


def builtin_text(name: str) -> BuiltinText:
    """The built-in text called ``name``."""
    for entry in BUILTIN_TEXTS:
        if entry.name == name:
            return entry
    raise UnknownNameError(
        f"unknown built-in text {name!r}; choose one of {[entry.name for entry in BUILTIN_TEXTS]}"
    )
