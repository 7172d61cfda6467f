"""The capacity model of docs/capacity.md, over scripts/capacity's runs.

Per committed purchase, each resource has a cost, measured on the
calibrating setups (the first two of the run, one instance and one shard
at two crowd sizes, so two batch sizes):

  CPU        c(B) = c_order + c_batch / B for the instance, PostgreSQL and
             Redis (B: orders per store commit, or purchases per Redis
             script call), the load generator's per request
  store      one sale's commits are serial (each holds the sale's row lock
             until it is durable): a commit of B orders holds it
             s(B) = a + b * B
  batches    a purchase of a crowd of C waits through m = C / B commits;
             another instance's writer puts one more batch ahead of it

A setup of N instances, S shards and C connections on this K-core machine
then sells at most
  X_store = B / s(B)               with B = C / (m + N - 1)
  X_cpu   = K / (sum of every process's c)   (the machine's cores)
  X_redis = min(S, P) / c_redis    (the busiest of P primaries: one core)
and the prediction is the least of them: the resource that binds.
"""

import statistics

# Predictions further than this from the measured median miss the goal.
TOLERANCE = 0.25
# The resources a bound names.
STORE = "store (one sale's commits)"
CPU = "CPU (the machine's cores)"
REDIS = "Redis (busiest primary)"
# The most orders the writer commits at once (--batch-max's default).
MAX_BATCH = 512


def median(values):
    return statistics.median(values)


def spread(values, fmt):
    return f"{fmt(median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def per_run(run):
    """The figures of one run, per committed purchase."""
    n = max(run["purchases"], 1)
    rate = run["purchases"] / run["wrk_seconds"]
    commits = max(run["commits"], 1)
    scripts = max(sum(run["redis_scripts"]), 1)
    return {
        "rate": rate,
        "instance_us": run["instances_cpu"] / n * 1e6,
        "postgres_us": run["postgres_cpu"] / n * 1e6,
        "redis_us": sum(run["redis_cpu"]) / n * 1e6,
        "redis_busiest_us": max(run["redis_cpu"]) / n * 1e6,
        "load_us": run["wrk_cpu"] / n * 1e6,
        "busy": run["machine_busy"] / max(run["machine_total"], 1e-9),
        "store_batch": run["committed"] / commits,
        "redis_batch": n / scripts,
        "hold_ms": run["committed"] / commits / rate * 1e3,
        "http_bytes": run["http_bytes"] / n,
        "redis_bytes": run["redis_bytes"] / n,
        "other_bytes": max(run["loopback_bytes"] - run["http_bytes"] - run["redis_bytes"], 0) / n,
        "p50_ms": run["p50_ms"],
    }


def setups_of(measured):
    """{(instances, shards, connections): [per-run figures]} in run order."""
    setups = {}
    for run in measured["runs"]:
        key = (run["instances"], run["shards"], run.get("connections", measured["connections"]))
        setups.setdefault(key, []).append(per_run(run))
    return setups


def medians(runs):
    return {field: median([r[field] for r in runs]) for field in runs[0]}


def line(x1, y1, x2, y2):
    """(intercept, slope) of the line through two points."""
    slope = (y2 - y1) / (x2 - x1) if x2 != x1 else 0.0
    return y1 - slope * x1, slope


def calibrate(measured, setups):
    """The model's parameters, from the first two of `setups` (one
    instance, one shard, two crowd sizes)."""
    keys = list(setups)
    if len(keys) < 2 or keys[0][:2] != (1, 1) or keys[1][:2] != (1, 1) or keys[0][2] == keys[1][2]:
        raise ValueError("the first two setups must be 1x1 at two crowd sizes (e.g. 1x1,1x1@128,...)")
    big, small = (medians(setups[k]) for k in keys[:2])
    crowd = keys[0][2]
    model = {"cores": measured["cores"], "primaries": 3, "crowd": crowd, "big": big, "small": small}
    # Lock hold per commit, and each CPU cost, as lines in B or 1/B.
    model["a_ms"], model["b_ms"] = line(small["store_batch"], small["hold_ms"],
                                        big["store_batch"], big["hold_ms"])
    for name, batch in (("instance_us", "store_batch"), ("postgres_us", "store_batch"),
                        ("redis_us", "redis_batch")):
        model[name] = line(1 / small[batch], small[name], 1 / big[batch], big[name])
    model["load_us"] = big["load_us"]
    model["m"] = crowd / big["store_batch"]
    # Redis batches: purchases per script call grow with the rate each
    # batcher (instance x shard) sees, over the calibrated call cycle.
    model["redis_cycle_s"] = big["redis_batch"] / big["rate"]
    return model


def cost(model, name, batch):
    base, per_batch = model[name]
    return base + per_batch / max(batch, 1.0)


def predict(model, instances, shards, connections):
    """(purchases/s, the binding resource, the bounds) of a setup on this machine."""
    batch = connections / (model["m"] + instances - 1)
    x_store = batch / ((model["a_ms"] + model["b_ms"] * batch) / 1e3)
    rate = x_store
    for _ in range(50):  # the Redis batch depends on the rate: iterate
        redis_batch = max(rate * model["redis_cycle_s"] / (instances * shards), 1.0)
        redis_us = cost(model, "redis_us", redis_batch)
        total_us = (cost(model, "instance_us", batch) + cost(model, "postgres_us", batch)
                    + redis_us + model["load_us"])
        bounds = {
            STORE: x_store,
            CPU: model["cores"] / (total_us / 1e6),
            REDIS: min(shards, model["primaries"]) / (redis_us / 1e6),
        }
        binding = min(bounds, key=bounds.get)
        rate = bounds[binding]
    return rate, binding, bounds, batch


def units(model):
    """What one unit of each resource sells when it alone binds, from the
    costs measured on one shared machine (conservative: there every process
    also waited for a core), the store's batches full (MAX_BATCH orders)."""
    return [
        ("one instance core", 1 / (cost(model, "instance_us", MAX_BATCH) / 1e6)),
        ("one Redis primary (one shard of a hot sale)",
         1 / (cost(model, "redis_us", model["big"]["redis_batch"]) / 1e6)),
        ("one hot sale in the store (its commits are serial)",
         MAX_BATCH / ((model["a_ms"] + model["b_ms"] * MAX_BATCH) / 1e3)),
        ("one PostgreSQL core (commits of different sales)", 1 / (cost(model, "postgres_us", MAX_BATCH) / 1e6)),
    ]


def report(measured):
    setups = setups_of(measured)
    model = calibrate(measured, setups)
    big = model["big"]
    out = []
    out.append(f"Calibration: 1 instance, 1 shard, {model['crowd']} and {list(setups)[1][2]} "
               f"connections (medians of {len(measured['runs']) // len(setups)} rounds), "
               f"{measured['cores']} cores.\n")
    out.append("| resource, per committed purchase | cost |")
    out.append("| --- | ---: |")
    rows = [
        ("instance CPU", f"{big['instance_us']:.0f} µs"),
        ("PostgreSQL CPU", f"{big['postgres_us']:.0f} µs"),
        ("Redis CPU, every primary", f"{big['redis_us']:.1f} µs"),
        ("load generator CPU (wrk)", f"{big['load_us']:.0f} µs"),
        ("Redis script calls", f"1 per {big['redis_batch']:.0f} purchases"),
        ("store commits", f"1 per {big['store_batch']:.0f} orders"),
        ("sale row lock held per commit", f"{model['a_ms']:.2f} ms + {model['b_ms'] * 1e3:.0f} µs per order"),
        ("HTTP bytes (request and answer)", f"{big['http_bytes']:.0f} B"),
        ("Redis bytes (in and out)", f"{big['redis_bytes']:.0f} B"),
        ("store and other loopback bytes", f"{big['other_bytes']:.0f} B"),
        ("machine busy", f"{big['busy']:.0%}"),
    ]
    out += [f"| {name} | {value} |" for name, value in rows]
    out.append("")
    out.append("| setup | measured purchases/s, median (range) | predicted | error | bound | "
               "next bound | orders per commit, measured / predicted |")
    out.append("| --- | ---: | ---: | ---: | --- | --- | ---: |")
    missed = 0
    for index, ((instances, shards, connections), runs) in enumerate(setups.items()):
        rate, binding, bounds, batch = predict(model, instances, shards, connections)
        runner_up = sorted(bounds, key=bounds.get)[1]
        measured_rate = median([r["rate"] for r in runs])
        error = rate / measured_rate - 1
        role = " (calibration)" if index < 2 else ""
        verdict = "" if index < 2 or abs(error) <= TOLERANCE else " MISSED"
        missed += bool(verdict)
        out.append(f"| {instances} instance(s), {shards} shard(s), {connections} connections{role} "
                   f"| {spread([r['rate'] for r in runs], lambda v: f'{v:,.0f}')} | {rate:,.0f} "
                   f"| {error:+.0%}{verdict} | {binding} | {runner_up}: {bounds[runner_up]:,.0f} "
                   f"| {median([r['store_batch'] for r in runs]):.0f} / {batch:.0f} |")
    out.append("")
    out.append("What one unit of each resource sells, purchases/s (the deployment's bound is the "
               "least of units x count):\n")
    out.append("| unit | purchases/s |")
    out.append("| --- | ---: |")
    out += [f"| {unit} | {rate:,.0f} |" for unit, rate in units(model)]
    if missed:
        out.append(f"\n{missed} prediction(s) further than {TOLERANCE:.0%} from the measurement.")
    return "\n".join(out)
