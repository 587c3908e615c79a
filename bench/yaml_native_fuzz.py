"""Long fuzz runs of the native YAML reader (vmtune/stacks/_yamlnodes.c), beyond what
tests/test_yamlnodes.py and tests/test_yamlnodes_hostile.py can afford in CI.

    python bench/yaml_native_fuzz.py diff [ROUNDS] [SEED]   grammar-generated YAML: native vs full loader
    python bench/yaml_native_fuzz.py drive [ROUNDS] [SEED] [SECONDS]
                                                           every kind of input through the native reader,
                                                           ROUNDS generated or until SECONDS are up
                                                           (run it under an ASan/UBSan build, see below:
                                                           scripts/fuzz-yaml-native does, in CI)
    python bench/yaml_native_fuzz.py leaks [CALLS]          tracemalloc, RSS and refcounts over CALLS calls
                                                           of each kind of input, taken and declined
    python bench/yaml_native_fuzz.py bounds                 time and memory of hostile inputs at the limits

An AddressSanitizer + UBSan build, in a copy of the tree (it replaces the in-place module):

    CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -O1 -g" \\
      LDFLAGS="-fsanitize=address,undefined" python setup.py build_ext --inplace --force
    LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) \\
      ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \\
      python bench/yaml_native_fuzz.py drive 200000
"""

from __future__ import annotations

import gc
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from yaml_grammar import Gen  # noqa: E402

from vmtune.errors import VmtuneError  # noqa: E402
from vmtune.stacks import yamldoc  # noqa: E402


def outcome(data: bytes, native: bool) -> Any:
    from test_yamlnodes import _outcome

    try:
        return _outcome(data, native)
    except Exception as exc:
        return ("traceback", type(exc).__name__, str(exc)[:80])


def diff(rounds: int, seed: int) -> int:
    rng = random.Random(seed)
    gen = Gen(rng)
    taken = failures = 0
    started = time.time()
    for round_ in range(rounds):
        data = gen.document().encode("utf-8", "surrogatepass")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        native = outcome(data, True)
        full = outcome(data, False)
        taken += yamldoc._read_natively(data) is not None
        if "traceback" in (native[:1] + full[:1]):
            failures += 1
            print(f"TRACEBACK round {round_}: {data!r}\n  native: {native}\n  full:   {full}")
        elif native != full:
            failures += 1
            print(f"DIFF round {round_}: {data!r}\n  native: {str(native)[:400]}\n  full:   {str(full)[:400]}")
            if failures > 40:
                break
    print(f"diff: {rounds} texts, {taken} taken natively, {failures} differences, {time.time() - started:.1f} s")
    return 1 if failures else 0


def hostile_inputs(rng: random.Random) -> list[bytes]:
    """Every kind of input: taken and declined, each decline path, errors, the limits."""
    texts = ["a: 1\nb: [true, ~, 2Gi]\n'c': \"d\"\n", "a: &x 1\nb: *x\n", "<<: {a: 1}\n", "a: 1\na: 2\n",
             "!!map {a: 1}\n", "1: a\n", "on: a\n", "a: !custom x\n", "a: b: c\n", "a: 2001-13-45\n", "? [a]\n: 1\n",
             "a: " + "9" * 5000 + "\n", "a: " + "9" * 4300 + "\n", "a: =\n", "a: <<\n", "=: 1\n", "<<: 1\n",
             "{a, b: c}\n", "? a\n: b\n", "a:\n", "---\n---\na: 1\n...\n", "",
             "%TAG !e! tag:e.com,2000:\n---\na: !e!x 1\n",
             "a: [" * 70 + "]" * 70 + "\n", "[" * 100000 + "]" * 100000, "{a: " * 60 + "1" + "}" * 60,
             "- " * 63 + "x\n", "- " * 65 + "x\n", "k" * 2000 + ": 1\n", "a: " + "x" * 400000 + "\n",
             "a: '" + "y" * 300000 + "'\n", "a: [" + ", ".join(str(i) for i in range(40000)) + "]\n",
             "".join(f"--- {i}\n" for i in range(20000)), "a: 1.5\n", "a: 0x1F\n", "a: 1:30\n", "a: .inf\n",
             "a: 2002-12-14\n", "a: 1_000\n", "a: yes\n", "a: \x00\n", "a: \x1b\n", "\ufeffa: 1\n", "a: \u0085\n",
             "a: 1\rb: 2\r", "a:\t1\n", "a:\n\t- b\n", "'a': 1\na: 2\n", "{[a]: b}\n", "{{a: 1}: b}\n", "[?]\n",
             "a: !!binary 'not base64!'\n", "a: !!binary aGk=\n", "*x\n", "&a [*a]\n", "a: *unknown\n",
             "%YAML 2.0\n---\na\n", "%YAML 1.1\n%YAML 1.1\n---\na\n", "a: \"\\ud800\"\n", "a: \"\\x\"\n"]
    texts += ["".join(rng.choice("ab:- \n[]{},'\"#&*!|>?%@`~.019") for _ in range(rng.randint(1, 80)))
              for _ in range(300)]
    data = [t.encode("utf-8", "surrogatepass") for t in texts]
    data += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) for _ in range(200)]
    files = sorted(p for p in ROOT.glob("**/*.y*ml") if ".venv" not in p.parts and p.stat().st_size < 200_000)
    for path in files[:400]:
        raw = path.read_bytes()
        data.append(raw)
        for cut in (1, 7, len(raw) // 3, len(raw) // 2, len(raw) - 1):
            data.append(raw[:cut])
    return data


def drive(rounds: int, seed: int, seconds: float | None = None) -> int:
    """Every input through _read_natively (no comparison: an ASan/UBSan build reports): the fixed
    inputs, then `rounds` generated ones or as many as `seconds` allow, whichever ends first."""
    from stack_mutate import mutate_stack

    started = time.time()  # the budget counts the fixed inputs too: each is read, whatever it says
    rng = random.Random(seed)
    gen = Gen(rng)
    fixed = hostile_inputs(rng)
    for data in fixed:
        _native_once(data)
    sources = [d for d in fixed if len(d) > 200]
    done = 0
    for round_ in range(rounds):
        if round_ and round_ % 10000 == 0:
            print(f"drive: {round_} rounds, {time.time() - started:.0f} s", flush=True)
        if seconds is not None and round_ % 64 == 0 and time.time() - started > seconds:
            break
        done += 1
        r = rng.random()
        if r < 0.5:
            data = gen.document().encode("utf-8", "surrogatepass")
        elif r < 0.8:
            source = rng.choice(sources)
            try:
                data = mutate_stack(source, "x.yaml", rng)
            except Exception:
                data = source
        else:
            data = rng.choice(fixed)
            pos = rng.randrange(len(data) + 1)
            data = data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randint(0, 4))) + data[pos:]
        _native_once(data)
    print(f"drive: {len(fixed)} fixed inputs and {done} generated, {time.time() - started:.1f} s, no crash")
    return 0


def _native_once(data: bytes) -> Any:
    try:
        return yamldoc._read_natively(data)
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        print(f"native raised {type(exc).__name__}: {exc} on {data[:80]!r}")
        return None


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def leaks(calls: int) -> int:
    # The inputs and the measure of tests/test_yamlnodes_hostile.py's leak test: taken, and each
    # reason to decline
    from test_yamlnodes_hostile import _KINDS as kinds
    from test_yamlnodes_hostile import leak_figures

    status = 0
    for kind, data in kinds.items():
        for _ in range(1000):
            yamldoc._read_natively(data)
        gc.collect()
        rss = _rss_kib()
        drift, grown = leak_figures(data, calls, also={"None": None})
        rss_grown = _rss_kib() - rss
        drift = {name: moved for name, moved in drift.items() if moved}
        # a reference taken or dropped each call drifts by `calls`; None's count moves by a few
        # with whatever the interpreter does meanwhile
        bad = any(abs(d) >= calls // 10 for d in drift.values()) or grown > 64 * 1024 or rss_grown > 4096
        status |= bool(bad)
        print(f"{'LEAK' if bad else 'ok  '} {kind:16} {calls} calls: traced {grown:+,} B, RSS {rss_grown:+,} KiB, "
              f"refcount drift {drift or 'none'}")
    return status


def bounds() -> int:
    """Time and peak memory of hostile inputs up to the size the native reader is given
    (yamldoc.COUNT_EVENTS_ABOVE characters), natively and by the full loader."""
    limit = yamldoc.COUNT_EVENTS_ABOVE
    cases = {
        "flat flow list": b"[" + b"1," * (limit // 2 - 2) + b"1]",
        "deep flow 250k": b"[" * (limit // 2 - 1) + b"]" * (limit // 2 - 1),
        "deep block": b"".join(b"  " * i + b"- \n" for i in range(1000)),
        "one long scalar": b"a: " + b"x" * (limit - 10),
        "long keys": b"".join(b"k%07d" % i + b"x" * 1000 + b": 1\n" for i in range(limit // 1020)),
        "many documents": b"--- 1\n" * (limit // 6),
        "many ints": b"- " + b"\n- ".join(str(10 ** 60 + i).encode() for i in range(limit // 64)) + b"\n",
        "distinct numbers": b"- " + b"\n- ".join(b"%d.5" % i for i in range(limit // 12)) + b"\n",
        "sexagesimal": b"a: 1" + b":59" * (limit // 3 - 2) + b"\n",
    }
    for name, data in cases.items():
        for native in (True, False):
            saved = yamldoc._NATIVE
            if not native:
                yamldoc._NATIVE = False
            started = time.time()
            try:
                docs = yamldoc.load(data, "f.yaml")
                result = f"{len(docs)} docs"
            except VmtuneError as exc:
                result = f"error: {exc.message[:60]}"
            finally:
                yamldoc._NATIVE = saved
            took = time.time() - started
            print(f"{name:18} {len(data):>9,} B {'native' if native else 'full  '} {took:6.2f} s "
                  f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024:,} MiB: {result}")
    return 0


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "diff"
    count = int(argv[2]) if len(argv) > 2 else 20000
    seed = int(argv[3]) if len(argv) > 3 else 1
    if yamldoc._native_reader() is False:
        print("the native reader is not built")
        return 2
    if mode == "diff":
        return diff(count, seed)
    if mode == "drive":
        return drive(count, seed, float(argv[4]) if len(argv) > 4 else None)
    if mode == "leaks":
        return leaks(count)
    if mode == "bounds":
        return bounds()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
