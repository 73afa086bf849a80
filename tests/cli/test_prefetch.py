"""reads.prefetch: batches parsed ahead by a background thread come out in order, an error in the reader
reaches the consumer after the items before it, and a consumer that stops early stops the thread."""
import threading

import pytest

from mapper.errors import InputError
from mapper.reads import prefetch


def failing(n):
    yield from range(n)
    raise InputError("reads.fq", "truncated", line=9)


def test_items_in_order_then_the_error():
    got = []
    with pytest.raises(InputError, match="line 9"):
        for item in prefetch(failing(5)):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_stopping_early_stops_the_reader():
    for item in prefetch(iter(range(10_000)), depth=2):
        if item == 3:
            break
    assert not any(t.name == "gkmap-reader" for t in threading.enumerate())


def test_reader_starts_at_once_and_stops_when_dropped_unused():
    """The thread reads ahead before the first `next` (the pipeline opens its index meanwhile); an iterator
    dropped before its first item (the index failed to open) still stops it."""
    import gc
    import time
    seen = []

    def source():
        for i in range(10):
            seen.append(i)
            yield i

    items = prefetch(source(), depth=2)
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen[:2] == [0, 1]
    del items
    gc.collect()
    deadline = time.monotonic() + 10
    while any(t.name == "gkmap-reader" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "gkmap-reader" for t in threading.enumerate())
