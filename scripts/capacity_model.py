"""Placeholder: prints per-setup figures."""
import statistics

def report(measured):
    lines = []
    for run in measured["runs"]:
        n = max(run["purchases"], 1)
        lines.append(f"{run['instances']}x{run['shards']} r{run['round']}: X={run['purchases']/run['wrk_seconds']:.0f}/s "
                     f"busy={run['machine_busy']/run['machine_total']:.2f} inst={run['instances_cpu']/n*1e6:.1f}us "
                     f"pg={run['postgres_cpu']/n*1e6:.1f}us redis={[round(c/n*1e6,2) for c in run['redis_cpu']]} "
                     f"wrk={run['wrk_cpu']/n*1e6:.1f}us scripts/p={[round(c/n,3) for c in run['redis_scripts']]} "
                     f"commit B={run['committed']/max(run['commits'],1):.1f} commit_s/commit={run['commit_seconds']/max(run['commits'],1)*1e3:.1f}ms "
                     f"http_B/p={run['http_bytes']/n:.0f} redis_B/p={run['redis_bytes']/n:.0f} lo_B/p={run['loopback_bytes']/n:.0f} "
                     f"p50={run['p50_ms']:.1f}ms")
    return "\n".join(lines)
