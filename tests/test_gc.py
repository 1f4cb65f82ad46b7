"""``paused_gc()`` (sgdnet/_gc.py): no cyclic collection inside the block; afterwards what the
block allocated waits for full collections instead of being walked by the young ones, and a
reference cycle made inside is still collected."""

import gc
import weakref

from sgdnet._gc import paused_gc


class _Node:
    pass


def test_block_objects_go_to_the_oldest_generation_and_cycles_are_still_collected():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # re-entrant: the inner block leaves the collector off
            pass
        assert not gc.isenabled()
        made = [[i] for i in range(2000)]
        cyc = _Node()
        cyc.me = cyc
        dead = weakref.ref(cyc)
        del cyc
    assert gc.isenabled()
    young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
    assert not any(id(x) in young for x in made)
    assert any(o is made[0] for o in gc.get_objects(generation=2))
    assert dead() is not None  # a cycle: only a collection frees it
    gc.collect()
    assert dead() is None


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
