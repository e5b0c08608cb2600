#!/usr/bin/env python3
"""Measurement and statistics helpers for scripts/bench/run.

  stats.py mem PID...            -> "RSS_KiB PSS_KiB" summed over the pids
  stats.py cpu SECONDS PID...    -> "SCHED_PCT TICK_PCT": CPU used by the pids
                                    over SECONDS, in % of one core, from
                                    /proc/PID/task/*/schedstat (ns) and from
                                    utime+stime in /proc/PID/stat (ticks)
  stats.py pct FILE              -> "p50 p90 p99" of the numbers in FILE
  stats.py tree PID...           -> "PROCS RSS_KiB PSS_KiB" of the pids and all
                                    their descendants, then a line of their pids
  stats.py gobench FILE          -> "go.NAME.UNIT VALUE" lines from `go test
                                    -bench` output (NAME without Benchmark and
                                    the -GOMAXPROCS suffix)
  stats.py table RESULTS N R [NIX_N CTR_N]
                                 -> the report table from "key value" lines
"""
import os, re, statistics, sys, time

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


def tree(roots):
    """The roots and their descendants (those alive), by /proc's ppid."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
        except (FileNotFoundError, ProcessLookupError):
            continue
        kids.setdefault(ppid, []).append(d)
    seen, todo = [], [str(p) for p in roots if os.path.exists(f"/proc/{p}")]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        todo.extend(kids.get(p, []))
    return seen


def gobench(path):
    out = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if not fields or not fields[0].startswith("Benchmark") or len(fields) < 4:
                continue
            name = re.sub(r"-\d+$", "", fields[0][len("Benchmark"):])
            for i in range(2, len(fields) - 1, 2):
                try:
                    v = float(fields[i])
                except ValueError:
                    continue
                out.append(f"go.{name}.{fields[i + 1]} {v}")
    return out


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


def table(path, n, r, nx=0, nc=0, scale=""):
    nx, nc = int(nx), int(nc)
    scale = [int(x) for x in scale.split(",") if x]
    vals = {}
    with open(path) as f:
        for line in f:
            if len(line.split()) != 2:
                continue
            k, v = line.split()
            vals.setdefault(k, []).append(float(v))
    med = {k: statistics.median(v) for k, v in vals.items()}

    def g(k, fmt="{:.3f}", f=lambda x: x):
        return fmt.format(f(med[k])) if k in med else "n/a"

    def ratio(a, b):
        a, b = med.get(a), med.get(b)
        return f"{a / b:.2f}x" if a is not None and b else "n/a"

    extra = []
    if nx:
        extra.append(f"nix: {nx}")
    if nc:
        extra.append(f"containerd: {nc}")
    out = []
    out.append(f"N = {n} workloads{' (' + ', '.join(extra) + ')' if extra else ''}, medians of {r} repetitions")
    out.append("")
    out.append("| | start ms/workload | stop ms/workload | RSS MiB | PSS MiB | idle CPU % of a core |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    rows = [("plain spawn", "plain"), ("flyd", "flyd"), ("supervisord", "sup"), ("s6", "s6")]
    if nx:
        rows += [(f"nix: plain `nix develop --command` (N={nx})", "nix.plain"), (f"nix: flyd (N={nx})", "nix.flyd")]
    if nc:
        rows += [(f"containerd: plain `ctr run -d` (N={nc})", "ctr.plain"), (f"containerd: flyd (N={nc})", "ctr.flyd")]
    for name, k in rows:
        out.append("| {} | {} | {} | {} | {} | {} |".format(
            name, g(k + ".start"), g(k + ".stop"), g(k + ".rss", "{:.1f}"),
            g(k + ".pss", "{:.1f}"), g(k + ".cpu", "{:.3f}")))
    out.append("")
    out.append("| ratio | start | stop |")
    out.append("| --- | ---: | ---: |")
    for name, k in (("flyd / plain", "plain"), ("flyd / supervisord", "sup"), ("flyd / s6", "s6")):
        out.append(f"| {name} | {ratio('flyd.start', k + '.start')} | {ratio('flyd.stop', k + '.stop')} |")
    if nx:
        out.append(f"| nix: flyd / `nix develop` | {ratio('nix.flyd.start', 'nix.plain.start')} | {ratio('nix.flyd.stop', 'nix.plain.stop')} |")
    if nc:
        out.append(f"| containerd: flyd / `ctr run -d` | {ratio('ctr.flyd.start', 'ctr.plain.start')} | {ratio('ctr.flyd.stop', 'ctr.plain.stop')} |")
        # flyd's stop returns once task, container and snapshot are deleted:
        # the plain side's kill and delete together.
        if "ctr.plain.stop" in med and "ctr.plain.rm" in med and "ctr.flyd.stop" in med:
            both = med["ctr.plain.stop"] + med["ctr.plain.rm"]
            out.append(f"| containerd: flyd stop / `ctr task kill` + `ctr task delete` + `ctr container delete` | | {med['ctr.flyd.stop'] / both:.2f}x |")
    out.append("")
    out.append("| flyd only | value |")
    out.append("| --- | ---: |")
    out.append(f"| apply-to-running latency p50 ms | {g('flyd.lat.p50')} |")
    out.append(f"| apply-to-running latency p90 ms | {g('flyd.lat.p90')} |")
    out.append(f"| apply-to-running latency p99 ms | {g('flyd.lat.p99')} |")
    out.append(f"| daemon restart with {n} running, until all adopted (same pids), ms | {g('flyd.restart', '{:.1f}')} |")
    out.append(f"| the log holder's PSS with {n} running (not in flyd's above), MiB | {g('flyd.holderpss', '{:.1f}')} |")
    out.append(f"| `flyd apply -f DIR` CLI call alone, ms/workload | {g('flyd.applycli')} |")
    out.append(f"| `flyd stop --all` CLI call alone, ms/workload | {g('flyd.stopcli')} |")
    out.append(f"| `flyd rm --all` of {n} stopped, ms/workload | {g('flyd.rm')} |")
    out.append(f"| the daemon's CPU a workload (its threads' schedstat), start / stop, µs | {g('flyd.startcpu', '{:.1f}')} / {g('flyd.stopcpu', '{:.1f}')} |")
    out.append(f"| a CLI call that asks the daemon (`flyd status`), ms, against a Go hello-world binary, ms | "
               f"{g('flyd.statuscli')} / {g('hello.cli')} ({ratio('flyd.statuscli', 'hello.cli')}) |")
    out.append(f"| `flyd ps` with {n} running, ms | {g('flyd.pscli', '{:.1f}')} |")
    out.append(f"| idle CPU from utime+stime ticks (10 ms resolution), flyd / supervisord / s6 % | "
               f"{g('flyd.cputick', '{:.2f}')} / {g('sup.cputick', '{:.2f}')} / {g('s6.cputick', '{:.2f}')} |")
    if any(k.startswith("go.") for k in med):
        per_s = lambda ns: 1e9 / ns  # noqa: E731
        pct = lambda ms_s: ms_s / 10  # cpu-ms/s -> % of one core  # noqa: E731
        us = lambda ns: ns / 1000  # noqa: E731
        for label, b in (("host network, table persisted (on tmpfs, like the run dir)", "AllocateTemporaryPort/persisted"),
                         ("host network, table in memory", "AllocateTemporaryPort/memory"),
                         ("isolated network, probe inside its netns, table in memory", "AllocateInNamespace")):
            out.append(f"| ephemeral port allocate+release per second, {label} | {g(f'go.{b}.ns/op', '{:,.0f}', per_s)} |")
        out.append(f"| registrar CPU % of a core, 1,000 instances, in-process fake registry, 3 s lease "
                   f"({g('go.SchedulerCPU.heartbeats/s', '{:.0f}')} heartbeats/s) | {g('go.SchedulerCPU.cpu-ms/s', '{:.2f}', pct)} |")
        for ttl in ("30s", "3s"):
            b = f"go.HeartbeatHTTP/ttl={ttl}"
            note = ", the default" if ttl == "30s" else ""
            out.append(f"| registrar + embedded registry over loopback HTTP, CPU % of a core, 1,000 instances, {ttl[:-1]} s lease{note} "
                       f"({g(b + '.heartbeats/s', '{:.0f}')} heartbeats/s) | {g(b + '.cpu-ms/s', '{:.2f}', pct)} |")
        out.append(f"| CPU µs per heartbeat: fake registry / HTTP 3 s lease / HTTP 30 s lease | "
                   f"{g('go.SchedulerCPU.cpu-ns/heartbeat', '{:.0f}', us)} / {g('go.HeartbeatHTTP/ttl=3s.cpu-ns/heartbeat', '{:.0f}', us)}"
                   f" / {g('go.HeartbeatHTTP/ttl=30s.cpu-ns/heartbeat', '{:.0f}', us)} |")
        out.append(f"| registry capacity, register + heartbeat pairs per second (parallel keep-alive clients) | "
                   f"{g('go.RegisterHeartbeat.ops/s', '{:,.0f}')} |")
        ms = lambda ns: ns / 1e6  # noqa: E731
        out.append(f"| isolated network made and deleted, ms: island / linked to the host | "
                   f"{g('go.NetworkLifecycle/island.ns/op', '{:.2f}', ms)} / {g('go.NetworkLifecycle/connected.ns/op', '{:.2f}', ms)} |")
        out.append(f"| 64-byte round trip µs, host loopback direct / through a published port into a network, nftables / at connect() | "
                   f"{g('go.RoundTrip/direct.ns/op', '{:.1f}', us)} / {g('go.RoundTrip/published.ns/op', '{:.1f}', us)}"
                   f" / {g('go.RoundTrip/published-bpf.ns/op', '{:.1f}', us)} |")
        out.append(f"| echo throughput MB/s, host loopback direct / through a published port, nftables / at connect() / to the network's own address (the host's NAT skipped) | "
                   f"{g('go.Throughput/direct.MB/s', '{:,.0f}')} / {g('go.Throughput/published.MB/s', '{:,.0f}')}"
                   f" / {g('go.Throughput/published-bpf.MB/s', '{:,.0f}')} / {g('go.Throughput/inner.MB/s', '{:,.0f}')} |")
    if nx or nc:
        out.append("")
        out.append("| nix and containerd | value |")
        out.append("| --- | ---: |")
    if nx:
        out.append(f"| nix: processes per running `nix develop --command` workload (1 = nothing of nix stays resident) | {g('nix.plain.procs', '{:.2f}')} |")
        out.append(f"| nix: RSS MiB per running `nix develop --command` workload, all its processes | {g('nix.plain.wlrss', '{:.1f}')} |")
        out.append(f"| nix: first (cold) start, flyd (print-dev-env into its empty cache), ms | {g('nix.flyd.cold', '{:.1f}')} |")
        out.append(f"| nix: first (cold) start, `nix develop` (empty eval cache), ms | {g('nix.plain.cold', '{:.1f}')} |")
        out.append(f"| nix: `flyd apply -f DIR` / `flyd stop --all` CLI calls alone, ms/workload | {g('nix.flyd.applycli')} / {g('nix.flyd.stopcli')} |")
    if nc:
        out.append(f"| containerd: first (cold) start, flyd (archive import + unpack), ms | {g('ctr.flyd.cold', '{:.1f}')} |")
        out.append(f"| containerd: `ctr images import` / first `ctr run -d`, ms | {g('ctr.plain.import', '{:.1f}')} / {g('ctr.plain.cold', '{:.1f}')} |")
        out.append(f"| containerd: `flyd apply -f DIR` / `flyd stop --all` CLI calls alone, ms/workload | {g('ctr.flyd.applycli')} / {g('ctr.flyd.stopcli')} |")
        out.append(f"| containerd: after the stop, `ctr task delete` + `ctr container delete` / `flyd rm --all`, ms/workload | "
                   f"{g('ctr.plain.rm')} / {g('ctr.flyd.rm')} |")
    if scale:
        out.append("")
        out.append("Scale: plain and flyd at each N, one repetition each")
        out.append("")
        out.append("| N | plain start ms/wl | flyd start ms/wl | ratio | plain stop ms/wl | flyd stop ms/wl | ratio "
                   "| flyd RSS MiB | flyd PSS MiB | idle CPU % | idle % from ticks | `flyd ps` ms | `flyd status` ms | restart ms "
                   "| with an endpoint: start ms/wl | ratio | stop ms/wl | restart ms | daemon CPU µs/wl: start | stop |")
        out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                   "| ---: | ---: | ---: | ---: | ---: | ---: |")
        for sn in scale:
            p = f"scale.{sn}."
            out.append(f"| {sn:,} | {g(p + 'plain.start')} | {g(p + 'flyd.start')} | {ratio(p + 'flyd.start', p + 'plain.start')} "
                       f"| {g(p + 'plain.stop')} | {g(p + 'flyd.stop')} | {ratio(p + 'flyd.stop', p + 'plain.stop')} "
                       f"| {g(p + 'flyd.rss', '{:.1f}')} | {g(p + 'flyd.pss', '{:.1f}')} | {g(p + 'flyd.cpu', '{:.3f}')} "
                       f"| {g(p + 'flyd.cputick', '{:.2f}')} | {g(p + 'flyd.pscli', '{:.1f}')} | {g(p + 'flyd.statuscli')} "
                       f"| {g(p + 'flyd.restart', '{:.0f}')} "
                       f"| {g(p + 'ep.flyd.start')} | {ratio(p + 'ep.flyd.start', p + 'plain.start')} "
                       f"| {g(p + 'ep.flyd.stop')} | {g(p + 'ep.flyd.restart', '{:.0f}')} "
                       f"| {g(p + 'flyd.startcpu', '{:.1f}')} | {g(p + 'flyd.stopcpu', '{:.1f}')} |")
        lo, hi = min(scale), max(scale)
        a, b = med.get(f"scale.{lo}.flyd.pss"), med.get(f"scale.{hi}.flyd.pss")
        if hi > lo and a is not None and b is not None:
            out.append("")
            out.append(f"flyd PSS per additional workload, N = {lo:,} to {hi:,}: {(b - a) * 1024 / (hi - lo):.1f} KiB")
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
    elif cmd == "tree":
        pids = tree(args)
        rss, pss = mem(pids)
        print(len(pids), rss, pss)
        print(" ".join(pids))
    elif cmd == "gobench":
        lines = gobench(args[0])
        if lines:
            print("\n".join(lines))
    elif cmd == "table":
        table(*args[:6])
    else:
        sys.exit(f"stats.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
