#!/usr/bin/env python3
"""How many translation units a change to a header rebuilds (issue 26, section 2).

Reads the compiler's own dependency records (`ninja -t deps`) of a configured, built build
folder, so the count is what the build really recompiles, not what a grep of #include lines
guesses. Translation units under tests/, bench/ and the fuzzers are counted apart ("outside
tests" is the goal's measure).

  scripts/header_reach.py [--build DIR] [HEADER ...]

With no HEADER: the project's seam headers (the session seam and its values, the adapter, the
run's public types, the bodies' view of the run), then the ten headers that reach the most
translation units.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEAM_HEADERS = ["adapters/session.hpp", "adapters/adapter_outputs.hpp", "adapters/adapter.hpp", "adapters/run_spec.hpp",
                "adapters/launch_plan.hpp", "daemon/run/run.hpp", "daemon/run/run_types.hpp", "daemon/run/body_host.hpp"]
TEST_DIRS = ("tests/", "bench/", "fuzz/", "tests/fuzz/")


def read_deps(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "deps"], check=True, capture_output=True, text=True).stdout
    units = {}  # object -> (source, set of project headers)
    current = None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = line.split(":", 1)[0]
            units[current] = [None, set()]
            continue
        path = os.path.normpath(os.path.join(build, line.strip()))
        if not path.startswith(ROOT + os.sep):
            continue  # a system header
        rel = os.path.relpath(path, ROOT)
        if units[current][0] is None:
            units[current][0] = rel  # the first dependency is the source itself
        elif rel.endswith((".hpp", ".h")):
            units[current][1].add(rel)
    return units


def is_test(source):
    return source is not None and source.startswith(TEST_DIRS)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("headers", nargs="*")
    args = parser.parse_args()
    # Ninja's records name files relative to the build folder: a relative --build would leave
    # every project header looking like a system one (a count of 0).
    args.build = os.path.abspath(args.build)
    if not os.path.exists(os.path.join(args.build, "build.ninja")):
        sys.exit(f"header_reach: {args.build} is not a configured Ninja build folder (./run build first)")
    units = read_deps(args.build)
    if not units:
        sys.exit("header_reach: the build folder holds no dependency records yet (./run build first)")
    reach = {}
    for source, headers in units.values():
        for header in headers:
            product, tests = reach.get(header, (0, 0))
            reach[header] = (product + (0 if is_test(source) else 1), tests + (1 if is_test(source) else 0))
    product_total = sum(1 for s, _ in units.values() if not is_test(s))
    test_total = len(units) - product_total
    print(f"translation units: {product_total} outside tests, {test_total} in tests/bench/fuzz")
    print(f"{'header':<48} {'outside tests':>13} {'tests':>6}")
    wanted = args.headers or [h for h in SEAM_HEADERS if os.path.exists(os.path.join(ROOT, h))]
    for header in wanted:
        header = os.path.normpath(header)
        if not os.path.exists(os.path.join(ROOT, header)):
            print(f"{header:<48} {'(no such header)':>13}")
            continue
        product, tests = reach.get(header, (0, 0))
        print(f"{header:<48} {product:>13} {tests:>6}")
    if not args.headers:
        print("\nthe ten headers that reach the most translation units outside tests:")
        for header, (product, tests) in sorted(reach.items(), key=lambda kv: -kv[1][0])[:10]:
            print(f"{header:<48} {product:>13} {tests:>6}")


if __name__ == "__main__":
    main()
