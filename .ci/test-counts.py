#!/usr/bin/env python3
"""The runner's real counts from a `swift test` log: `N passed, N failed, N skipped`.

    test-counts.py LOG [--no-skips]

Swift Testing prints one line per test outcome (`✔ Test f() passed after ...`, `✘ Test f()
failed after ...` or `... recorded an issue ...`, `➜ Test f() skipped: "reason"`); a test whose
trait failed it before it ran has only its `recorded an issue` line. Counted per test name, each
test once: failed if any line says so, else skipped, else passed. XCTest's `Executed N tests, with
M failures` (the last one, its "All tests" total) is added. Each skip is listed with its reason.

--no-skips (CI): exit 1 when any test was skipped, except those `make test` never runs (their
reason says so: `make sanitize-thread runs it`), since on CI every proof must run. Exit 1 as well
when the log holds no test outcome at all (a run that never started is no pass).
"""
import re
import sys

OUTCOME = re.compile(r'^\S*\s*Test (?!run with|case )(.+?) (passed after|failed after|recorded an issue|recorded a known issue|skipped)(.*)$')
XCTEST = re.compile(r'Executed (\d+) tests?, with (\d+) failures?')
ALLOWED_SKIPS = ("make sanitize-thread runs it",)


def counts(lines):
    passed, failed, skipped = set(), set(), {}
    xc_total = xc_failed = 0
    for line in lines:
        m = OUTCOME.match(line.rstrip("\n"))
        if m:
            name, what, rest = m.groups()
            if what == "passed after":
                passed.add(name)
            elif what in ("failed after", "recorded an issue"):
                failed.add(name)
            elif what == "skipped":
                reason = rest.lstrip(":. ").strip()
                skipped[name] = reason[1:-1] if reason.startswith('"') and reason.endswith('"') else reason
            continue
        x = XCTEST.search(line)
        if x:
            xc_total, xc_failed = int(x.group(1)), int(x.group(2))
    skipped = {n: r for n, r in skipped.items() if n not in failed}
    passed -= failed
    passed -= skipped.keys()
    return len(passed) + xc_total - xc_failed, len(failed) + xc_failed, skipped


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        n_passed, n_failed, skipped = counts(f)
    print(f"{n_passed} passed, {n_failed} failed, {len(skipped)} skipped")
    for name, reason in sorted(skipped.items()):
        print(f"  skipped: {name}: {reason}")
    status = 0
    if n_passed + n_failed + len(skipped) == 0:
        print("no test outcome in the log: the tests did not run")
        status = 1
    if "--no-skips" in sys.argv[2:]:
        refused = {n: r for n, r in skipped.items() if not any(a in r for a in ALLOWED_SKIPS)}
        if refused:
            print(f"CI: {len(refused)} skipped, and on CI every proof must run:")
            for name, reason in sorted(refused.items()):
                print(f"  {name}: {reason}")
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
