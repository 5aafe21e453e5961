#!/usr/bin/env python3
"""Check the docstrings of gmr's public functions (shared/notes/style.md §9).

Each header's banner must say whether its types are thread-safe, and no line
may cite a design as "seed N". For every GMR_API declaration in the headers
given on the command line (or include/gmr/*.h), and for every static inline
function a header defines, the comment right above it must:
  - exist, and start with a sentence that says what the function does;
  - say whether it is thread-safe ("Thread-safe");
  - never cite a design as "seed N" (name RMM, PyTorch, cuCascade, ...);
and, for a function that returns gmr_status:
  - have a Returns section that names GMR_OK and at least one failure status
    (GMR_ERR_...), or says "Returns as other_function()" for a documented
    function with the same statuses;
  - say what the state is after a failure ("failure", "fails", "nothing
    changed", "changes nothing", "unchanged", "never fails");
  - say whether it calls CUDA or synchronises ("Stream", "CUDA", "synchron",
    "device");
and, for a create function, say who owns what ("Ownership" or "borrowed").

The checker is deliberately simple: it checks that each section is there, not
that its content is right or that every status the code can return is listed
(a reviewer still reads them). Headers that another change is rewriting are
listed in PENDING_HEADERS with the reason; the list is kept empty.

Usage: check_docstrings.py [HEADER...]   exit 0 when clean, 1 with a report.
"""

import fnmatch
import os
import re
import sys

# Headers (glob patterns) being rewritten elsewhere, with the reason; each
# is checked once that work lands. Keep it empty.
PENDING_HEADERS = {}

FAILURE_STATE = re.compile(
    r"failure|fails|nothing chang|changes nothing|unchanged|never fails", re.I)
STREAM = re.compile(r"stream|cuda|synchron|device", re.I)
THREAD_SAFE = re.compile(r"thread[- ]safe", re.I)
SEED = re.compile(r"\bseeds?\s*(?:\d|n\b|#)", re.I)
DELEGATION = re.compile(r"Returns?\b[^.]*?\bas\s+(gmr_[a-z0-9_]+)\(\)", re.S | re.I)


def declarations(text):
    """Yield (name, return_type, comment or None, line) for each public function:
    every GMR_API declaration, and every static inline function a header
    defines (the per-type downcasts: public functions with no symbol)."""
    for m in re.finditer(r"^(?:GMR_API|static inline)\b", text, re.M):
        ends = [i for i in (text.find(";", m.start()), text.find("{", m.start())) if i >= 0]
        end = min(ends)
        decl = " ".join(text[m.start():end].split())
        name_match = re.search(r"(gmr_[A-Za-z0-9_]+)\s*\(", decl)
        if not name_match:
            continue
        name = name_match.group(1)
        head = decl[:name_match.start()]
        returns_status = re.search(r"\bgmr_status\b", head) is not None
        # The comment must end right above the declaration (blank lines allowed).
        before = text[:m.start()].rstrip()
        comment = None
        if before.endswith("*/"):
            start = before.rfind("/*")
            comment = before[start:]
        line = text.count("\n", 0, m.start()) + 1
        yield name, returns_status, comment, line


def check_one(name, returns_status, comment, documented):
    problems = []
    if comment is None:
        return ["no comment above the declaration"]
    body = " ".join(re.sub(r"^\s*/?\*+/?", "", comment, flags=re.M).split())
    if len(body.split()) < 4:
        problems.append("the comment says too little to say what the function does")
    if not THREAD_SAFE.search(body):
        problems.append("no 'Thread-safe:' line")
    if SEED.search(body):
        problems.append("cites a 'seed': name the public source (RMM, PyTorch, cuCascade, ...)")
    if returns_status:
        delegated = [d for d in DELEGATION.findall(body) if d != name]
        if delegated and not all(d in documented for d in delegated):
            missing = [d for d in delegated if d not in documented]
            problems.append("returns 'as' %s, which is not a documented public function"
                            % ", ".join(missing))
        if not re.search(r"\bReturns?\b", body):
            problems.append("no 'Returns' section")
        elif not delegated:
            if "GMR_OK" not in body:
                problems.append("the Returns section does not name GMR_OK")
            if "GMR_ERR_" not in body and not re.search(r"never fails|always GMR_OK", body):
                problems.append("the Returns section names no failure status (GMR_ERR_...)")
        if not delegated and not FAILURE_STATE.search(body):
            problems.append("does not say what the state is after a failure")
        if not STREAM.search(body):
            problems.append("does not say whether it calls CUDA or synchronises "
                            "('Stream/device: ...')")
    if name.endswith("_create") and not re.search(r"ownership|borrowed|owns", body, re.I):
        problems.append("a create function that does not say who owns what ('Ownership:')")
    return problems


# The checker checks itself first: a docstring it must refuse and one it must
# accept, so a change that makes it accept everything fails the test.
SELF_TEST_BAD = """
/** Frees it. */
GMR_API gmr_status gmr_thing_free(gmr_thing *t);
"""
SELF_TEST_GOOD = """
/**
 * Free `t`. Thread-safe: no. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (t NULL; nothing changed).
 */
GMR_API gmr_status gmr_thing_free(gmr_thing *t);
"""


def self_test():
    bad = [check_one(n, r, c, set()) for n, r, c, _ in declarations(SELF_TEST_BAD)]
    good = [check_one(n, r, c, set()) for n, r, c, _ in declarations(SELF_TEST_GOOD)]
    return len(bad) == 1 and len(bad[0]) >= 4 and good == [[]]


def main(argv):
    if not self_test():
        print("check_docstrings: the self-test failed: the checker no longer tells a bad "
              "docstring from a good one")
        return 1
    if argv:
        headers = argv
    else:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "gmr")
        headers = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".h"))
    found = []
    for path in headers:
        with open(path, encoding="utf-8") as f:
            found.append((path, list(declarations(f.read()))))
    documented = {name for _, decls in found for name, _, comment, _ in decls if comment}
    failures = 0
    checked = 0
    skipped = []
    for path, decls in found:
        base = os.path.basename(path)
        pending = [p for p in PENDING_HEADERS if fnmatch.fnmatch(base, p)]
        if pending:
            skipped.append("%s (%s)" % (base, PENDING_HEADERS[pending[0]]))
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        banner = re.match(r"\s*/\*.*?\*/", text, re.S)
        if banner is None or not THREAD_SAFE.search(banner.group(0)):
            print("%s:1: the banner has no 'Thread-safe:' line" % path)
            failures += 1
        for number, line_text in enumerate(text.splitlines(), 1):
            if SEED.search(line_text):
                print("%s:%d: cites a 'seed': name the public source" % (path, number))
                failures += 1
        for name, returns_status, comment, line in decls:
            checked += 1
            for problem in check_one(name, returns_status, comment, documented):
                print("%s:%d: %s: %s" % (path, line, name, problem))
                failures += 1
    print("check_docstrings: %d functions checked, %d problems" % (checked, failures))
    for s in skipped:
        print("check_docstrings: not checked yet: %s" % s)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
