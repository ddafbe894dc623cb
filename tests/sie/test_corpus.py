"""The rebuild oracle over the corpus: 33 programs x {gcc, clang} x {-O0, -O2}."""

from __future__ import annotations

import oracle


def test_corpus_oracle(engine):
    cases = oracle.run_corpus(workers=2)
    passed = [c for c in cases if c.verdict == "pass"]
    failed = [c for c in cases if c.verdict == "fail"]
    refused = [c for c in cases if c.verdict == "refused"]
    print(f"\nSIE oracle: {len(passed)}/{len(cases)} pass ({len(passed) / len(cases):.0%}),"
          f" {len(refused)} refused, {len(failed)} wrong")  # fmt: skip
    for c in refused:
        print(f"  refused {c.name}: {c.detail[0]}")
    for c in failed:
        print(f"  WRONG {c.name}: {c.detail}")
    assert len({c.program for c in cases}) >= 30
    assert not failed, "retuned binaries must behave exactly like rebuilt ones"
    assert all(c.detail and c.detail[0] for c in refused), "every refusal names its reason"
    # What must be refused: data layout and stack frames that depend on the constant.
    for c in refused:
        if c.program in ("static_table", "stack_array"):
            assert "layout" in c.detail[0] or "frame" in c.detail[0] or "shape" in c.detail[0]
    assert not [c for c in passed if c.program in ("static_table", "stack_array")]
    # Forms that must be handled with both compilers at both levels.
    for prog in ("cmp_lt", "clamp_max", "mul", "add_off", "mask_low", "compare_ge", "inlined_callers"):
        assert {c.verdict for c in cases if c.program == prog} == {"pass"}, prog
    inlined = [c for c in passed if c.program == "inlined_callers" and c.opt == "-O2"]
    assert all(len(c.table.consts[0].spans) >= 2 for c in inlined), "one span per inlined caller"
    assert len(passed) / len(cases) >= 0.7


def test_corpus_oracle_int3_fallback(engine):
    """The same oracle with every span patched by int3 and served by `xsie-user serve`."""
    cases = oracle.run_corpus(workers=2, force_int3=True, only=("gcc", "-O2"))
    passed = [c for c in cases if c.verdict == "pass"]
    failed = [c for c in cases if c.verdict == "fail"]
    print(f"\nSIE oracle (int3 fallback, gcc -O2): {len(passed)}/{len(cases)} pass")
    assert not failed, [(c.name, c.detail) for c in failed]
    assert len(passed) >= 20
