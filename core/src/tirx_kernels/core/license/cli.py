# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-license``: audit license headers, metadata and wheels; self-test; fix native headers.

    tirx-license audit [--package NAME ...] [--wheel PATH [PATH ...]] [--json] [--root DIR]
    tirx-license audit --self-test
    tirx-license fix [--package NAME ...] [--dry-run] [FILE ...]
    tirx-license list [--json]
    tirx-license sbom [--package NAME ...] [-o FILE]

Where it looks: inside a git checkout (or with ``--root``) the checkout's distributions plus
every other installed family; outside one, only what is installed (never a walk of the
current folder). Exit status: 0 clean, 1 findings (or refusals), 2 usage errors.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from pathlib import Path

from .audit import audit, expected_expression, own_python_files, required_files
from .discover import Distribution, Repo, discover, normalize
from .fix import fix
from .installed import python_files as installed_python_files
from .wheel import audit_wheel

DEBUG_ENV = "TIRX_LICENSE_DEBUG"


class UsageError(Exception):
    """A problem with what was asked: printed as one line, exit 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tirx-license", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="check headers, pyproject license fields, license files")
    a.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME",
        help="distribution (tirx-kernels-basic) or family (basic); repeatable",
    )
    # nargs="+" with "extend": both `--wheel dist/*.whl` (a shell glob) and repeated
    # `--wheel A --wheel B` work.
    a.add_argument(
        "--wheel",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        type=Path,
        help="also audit built wheels (one or more); alone, audit only the wheels",
    )
    a.add_argument("--json", action="store_true", help="machine-readable report")
    a.add_argument(
        "--self-test", action="store_true", help="prove every rule fires on synthetic broken cases"
    )
    a.add_argument("--root", type=Path, help="repository root (default: git top level)")
    f = sub.add_parser("fix", help="add the native header to header-less files of native packages")
    f.add_argument("files", nargs="*", type=Path)
    f.add_argument("--package", action="append", default=[], metavar="NAME")
    f.add_argument("--dry-run", action="store_true")
    f.add_argument("--root", type=Path)
    sb = sub.add_parser(
        "sbom",
        help="SPDX 2.3 JSON document of the distributions the audit "
        "covers (needs tirx-kernels-core[sbom])",
    )
    sb.add_argument("--package", action="append", default=[], metavar="NAME")
    sb.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    sb.add_argument("--root", type=Path)
    ls = sub.add_parser("list", help="the distributions the audit covers and their terms")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--root", type=Path)
    return p


def select(dists: list[Distribution], names: list[str]) -> list[Distribution]:
    """The named distributions (or families); without names, every one discovered: the
    checkout's, each other installed family (broken ones included) and the meta-package."""
    if not names:
        return list(dists)
    chosen = []
    for name in names:
        hits = [d for d in dists if d.name == normalize(name) or d.family == name]
        if not hits:
            known = ", ".join(d.name for d in dists) or "none installed"
            raise UsageError(f"no distribution or family {name!r}; known: {known}")
        chosen += [d for d in hits if d not in chosen]
    return chosen


def python_file_count(d: Distribution, repo: Repo | None, every) -> int:
    if d.kind == "broken":
        return 0
    if d.root is not None:
        home = d.home or repo
        assert home is not None  # a source tree is read inside a repository
        return len(own_python_files(d, home, every))
    return len(installed_python_files(d))


def _describe(d: Distribution, repo: Repo | None, every) -> dict:
    row = {
        "name": d.name,
        "kind": d.kind,
        "family": d.family,
        "version": d.version,
        "source": d.source(repo),
        "root": str(d.root) if d.root else None,
    }
    if d.kind == "broken":
        return row | {"error": d.error}
    policy = d.loaded_policy
    up = policy.upstream
    return row | {
        "expression": policy.expression,
        "expected": expected_expression(d, every),
        "copyright_holder": policy.copyright_holder,
        "upstream": up.url if up else None,
        "license_files": required_files(d),
        "python_files": python_file_count(d, repo, every),
    }


def _checkout(root: Path | None) -> Repo | None:
    if root is not None and not Path(root).is_dir():
        raise UsageError(f"--root {root} is not a directory")
    return Repo.find(root)


def audited(dists: list[Distribution], repo: Repo | None) -> str:
    """Which distributions, from where: grouped by source, in words."""
    groups: dict[str, list[str]] = {}
    for d in dists:
        groups.setdefault(d.source(repo), []).append(
            f"{d.name} {d.version}" if d.version else d.name
        )
    return "; ".join(f"{where}: {', '.join(names)}" for where, names in groups.items())


def cmd_audit(args) -> int:
    if args.self_test:
        from .selftest import run_self_test

        return run_self_test(as_json=args.json)
    repo = _checkout(args.root)
    skipped: list[str] = []
    dists, findings = discover(repo, skipped=skipped)
    wheels_only = bool(args.wheel) and not args.package
    chosen = [] if wheels_only else select(dists, args.package)
    if not chosen and not wheels_only:
        where = f"in the checkout {repo.root}" if repo else "installed (and no checkout here)"
        raise UsageError(
            f"no tirx-kernels distribution found {where}; pip install the "
            "families, run it from a checkout, or pass --root"
        )
    if chosen:
        findings += audit(chosen, repo, dists)
    for w in args.wheel:
        findings += audit_wheel(w, dists, repo)
    if args.package:
        skipped = []  # only what was asked for
    files = sum(python_file_count(d, repo, dists) for d in chosen)
    summary = (
        f"{len(chosen)} distributions ({audited(chosen, repo) or '-'}), {files} Python "
        f"files, {len(args.wheel)} wheels: {len(findings)} findings"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "ok": not findings,
                    "summary": summary,
                    "checkout": str(repo.root) if repo else None,
                    "distributions": [_describe(d, repo, dists) for d in chosen],
                    "skipped": skipped,
                    "wheels": [str(w) for w in args.wheel],
                    "findings": [f.to_json() for f in findings],
                },
                indent=2,
            )
        )
    else:
        for f in findings:
            print(f)
        for line in skipped:
            print(f"tirx-license audit: skipped {line}")
        print(f"tirx-license audit: {summary}")
    return 1 if findings else 0


def cmd_fix(args) -> int:
    repo = _checkout(args.root)
    if repo is None:
        raise UsageError(
            "fix edits a checkout's files, and there is none here: run it inside "
            "a git checkout or pass --root (installed files are never edited)"
        )
    dists, _ = discover(repo)
    # Only source trees of this checkout: never an installed file or another repository.
    mine = [
        d
        for d in select(dists, args.package)
        if d.root is not None and (d.root == repo.root or repo.root in d.root.parents)
    ]
    result = fix(mine, repo, dists, args.files or None, dry_run=args.dry_run)
    verb = "would add" if args.dry_run else "added"
    for rel, why in result.errors:
        print(f"{rel}: ERROR: {why}", file=sys.stderr)
    if result.errors:
        print(
            f"tirx-license fix: nothing written: {len(result.errors)} file(s) cannot be "
            "read (named above)",
            file=sys.stderr,
        )
        return 1
    for rel in result.fixed:
        print(f"{rel}: {verb} the native header")
    for rel, why in result.skipped:
        print(f"{rel}: left alone: {why}")
    for rel, why in result.refused:
        print(f"{rel}: REFUSED: {why}", file=sys.stderr)
    print(f"tirx-license fix: {len(result.fixed)} {verb}, {len(result.refused)} refused")
    return 1 if result.refused else 0


def cmd_list(args) -> int:
    repo = _checkout(args.root)
    skipped: list[str] = []
    dists, findings = discover(repo, skipped=skipped)
    rows = [_describe(d, repo, dists) for d in dists]
    if args.json:
        print(
            json.dumps(
                {
                    "checkout": str(repo.root) if repo else None,
                    "distributions": rows,
                    "skipped": skipped,
                    "findings": [f.to_json() for f in findings],
                },
                indent=2,
            )
        )
    else:
        for r in rows:
            terms = r.get("expected") or f"BROKEN: {r.get('error')}"
            print(f"{r['name']:28} {r['kind']:6} {terms:32} {r['source']}")
        for line in skipped:
            print(f"skipped {line}")
        for f in findings:
            print(f)
    return 1 if findings or any(d.kind == "broken" for d in dists) else 0


def cmd_sbom(args) -> int:
    from . import sbom

    repo = _checkout(args.root)
    dists, _ = discover(repo)
    chosen = select(dists, args.package)
    broken = [d for d in chosen if d.kind == "broken" or d.policy is None]
    chosen = [d for d in chosen if d not in broken and (d.root or d.installed)]
    if not chosen:
        raise UsageError(
            "no distribution to describe; pip install the families, run it "
            "from a checkout, or pass --root"
        )
    try:
        version = importlib.metadata.version("tirx-kernels-core")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    try:
        document = sbom.build_document(chosen, repo, dists, version)
    except sbom.SbomUnavailable as e:
        raise UsageError(str(e)) from None
    errors = sbom.validation_errors(document)
    if errors:
        print(
            f"tirx-license sbom: the document is not valid SPDX 2.3: {errors[0]}", file=sys.stderr
        )
        return 1
    text = sbom.to_json(document)
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    for d in broken:
        print(
            f"tirx-license sbom: left out {d.name}: its family failed to load ({d.error})",
            file=sys.stderr,
        )
    print(
        f"tirx-license sbom: {len(chosen)} distributions ({audited(chosen, repo)}), "
        f"{len(document.files)} ported files" + (f" -> {args.output}" if args.output else ""),
        file=sys.stderr,
    )
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # usage errors: argparse prints one line, exit 2
    try:
        commands = {"audit": cmd_audit, "fix": cmd_fix, "list": cmd_list, "sbom": cmd_sbom}
        code = commands[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not as a message at interpreter exit
        return code
    except BrokenPipeError:  # the reader (`| head`) stopped reading: nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except UsageError as e:
        print(f"tirx-license: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file or folder named on the command line, or the disk
        where = f" {e.filename}" if e.filename else ""
        print(
            f"tirx-license {args.command}: cannot access{where}: {e.strerror or e}; check "
            "the path and its permissions",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("tirx-license: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # no CLI path prints a traceback; the debug variable shows it
        if os.environ.get(DEBUG_ENV):
            raise
        print(
            f"tirx-license {args.command}: internal error: {type(e).__name__}: {e}; "
            f"rerun with {DEBUG_ENV}=1 for the traceback and report it",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
