#!/usr/bin/env python3
"""Measurement and statistics helpers for scripts/bench/run.

  stats.py mem PID...            -> "RSS_KiB PSS_KiB" summed over the pids
  stats.py cpu SECONDS PID...    -> "SCHED_PCT TICK_PCT": CPU used by the pids
                                    over SECONDS, in % of one core, from
                                    /proc/PID/task/*/schedstat (ns) and from
                                    utime+stime in /proc/PID/stat (ticks)
  stats.py pct FILE              -> "p50 p90 p99" of the numbers in FILE
  stats.py table RESULTS N R     -> the report table from "key value" lines
"""
import os, statistics, sys, time

TCK = os.sysconf("SC_CLK_TCK")


def mem(pids):
    rss = pss = 0
    for p in pids:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
        with open(f"/proc/{p}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
    return rss, pss


def sample(pids):
    ns = ticks = 0
    for p in pids:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        for t in os.listdir(f"/proc/{p}/task"):
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    ns += int(f.read().split()[0])
            except FileNotFoundError:
                pass
    return ns, ticks


def cpu(seconds, pids):
    ns0, t0 = sample(pids)
    w0 = time.monotonic()
    time.sleep(seconds)
    ns1, t1 = sample(pids)
    wall = time.monotonic() - w0
    return 100 * (ns1 - ns0) / 1e9 / wall, 100 * (t1 - t0) / TCK / wall


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def table(path, n, r):
    vals = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            vals.setdefault(k, []).append(float(v))
    med = {k: statistics.median(v) for k, v in vals.items()}

    def g(k, fmt="{:.3f}"):
        return fmt.format(med[k]) if k in med else "n/a"

    out = []
    out.append(f"N = {n} workloads, medians of {r} repetitions")
    out.append("")
    out.append("| | start ms/workload | stop ms/workload | RSS MiB | PSS MiB | idle CPU % of a core |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, k in (("plain spawn", "plain"), ("flyd", "flyd"), ("supervisord", "sup"), ("s6", "s6")):
        out.append("| {} | {} | {} | {} | {} | {} |".format(
            name, g(k + ".start"), g(k + ".stop"), g(k + ".rss", "{:.1f}"),
            g(k + ".pss", "{:.1f}"), g(k + ".cpu", "{:.3f}")))
    out.append("")
    out.append("| ratio | start | stop |")
    out.append("| --- | ---: | ---: |")
    for name, k in (("flyd / plain", "plain"), ("flyd / supervisord", "sup"), ("flyd / s6", "s6")):
        cells = []
        for m in ("start", "stop"):
            a, b = med.get("flyd." + m), med.get(k + "." + m)
            cells.append(f"{a / b:.2f}x" if a is not None and b else "n/a")
        out.append(f"| {name} | {cells[0]} | {cells[1]} |")
    out.append("")
    out.append("| flyd only | value |")
    out.append("| --- | ---: |")
    out.append(f"| apply-to-running latency p50 ms | {g('flyd.lat.p50')} |")
    out.append(f"| apply-to-running latency p90 ms | {g('flyd.lat.p90')} |")
    out.append(f"| apply-to-running latency p99 ms | {g('flyd.lat.p99')} |")
    out.append(f"| daemon restart with {n} running, until all adopted (same pids), ms | {g('flyd.restart', '{:.1f}')} |")
    out.append(f"| `flyd apply -f DIR` CLI call alone, ms/workload | {g('flyd.applycli')} |")
    out.append(f"| `flyd stop --all` CLI call alone, ms/workload | {g('flyd.stopcli')} |")
    out.append(f"| `flyd rm --all` of {n} stopped, ms/workload | {g('flyd.rm')} |")
    out.append(f"| idle CPU from utime+stime ticks (10 ms resolution), flyd / supervisord / s6 % | "
               f"{g('flyd.cputick', '{:.2f}')} / {g('sup.cputick', '{:.2f}')} / {g('s6.cputick', '{:.2f}')} |")
    print("\n".join(out))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "mem":
        rss, pss = mem(args)
        print(rss, pss)
    elif cmd == "cpu":
        a, b = cpu(float(args[0]), args[1:])
        print(f"{a:.4f} {b:.4f}")
    elif cmd == "pct":
        with open(args[0]) as f:
            v = [float(x) for x in f.read().split()]
        print(" ".join(f"{pct(v, q):.3f}" for q in (50, 90, 99)))
    elif cmd == "table":
        table(args[0], args[1], args[2])
    else:
        sys.exit(f"stats.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
