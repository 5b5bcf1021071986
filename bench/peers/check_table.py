"""Check a peers table.md: every case row has numbers for both tools.

usage: python3 check_table.py TABLE.md [MIN_ROWS]
Exit 0 when the per-iteration table has at least MIN_ROWS (default 1) rows,
each with a time for every ghfit CPU column and for normix, and the
convergence table has a finite log-likelihood for both tools in each row.
"""
import math
import re
import sys

TIME = re.compile(r"^([0-9.]+(?:e[-+]?[0-9]+)?) (s|ms|us)$")


def tables(text):
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = [cells]
                out.append(cur)
            elif not set("".join(cells)) <= set("-:"):
                cur.append(cells)
        else:
            cur = None
    return out


def is_time(c):
    m = TIME.match(c)
    return bool(m) and float(m.group(1)) > 0


def is_num(c):
    try:
        return math.isfinite(float(c))
    except ValueError:
        return False


def main():
    path = sys.argv[1]
    min_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    tb = tables(open(path).read())
    errs = []
    if len(tb) < 2:
        sys.exit("check_table: %s: expected 2 tables, found %d" % (path, len(tb)))
    head, rows = tb[0][0], tb[0][1:]
    if len(rows) < min_rows:
        errs.append("per-iteration table has %d rows, want >= %d" % (len(rows), min_rows))
    gcols = [i for i, h in enumerate(head) if h.startswith("ghfit") and "cuda" not in h]
    ncol = head.index("normix")
    if not gcols:
        errs.append("no ghfit columns in %s" % head)
    for r in rows:
        for i in gcols + [ncol]:
            if not is_time(r[i]):
                errs.append("row %s: column %r is %r, not a time" % (r[:3], head[i], r[i]))
    head2, rows2 = tb[1][0], tb[1][1:]
    if len(rows2) != len(rows):
        errs.append("convergence table has %d rows, per-iteration table %d" % (len(rows2), len(rows)))
    for r in rows2:
        for h in ("ghfit loglik", "normix loglik"):
            i = head2.index(h)
            if not is_num(r[i]):
                errs.append("row %s: %r is %r, not a number" % (r[:3], h, r[i]))
    if errs:
        print("check_table: FAILED\n  " + "\n  ".join(errs))
        return 1
    print("check_table: %d cases with numbers for ghfit and normix: OK" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
