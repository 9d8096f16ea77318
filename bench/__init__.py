"""Herald's benchmarks, each side by side with a reference measured in the same run.

Run ``python -m bench [--quick] [--only append,read]`` (``make bench [QUICK=1]``).
One module per benchmark (`bench.disk`… `bench.spark`), each ``run(config) ->
Report``; `bench.runner` repeats measurements and keeps medians and spreads,
`bench.servers` starts Herald, NATS JetStream, Redis and etcd on 127.0.0.1,
`bench.loadgen` drives them (wrk, or a raw-socket closed loop), and
`bench.report` writes ``bench/results/<name>.json``, ``SUMMARY.md`` and PNG plots.

    from bench.runner import Config
    from bench import append
    report = append.run(Config(quick=True))
    [(h.label, h.ratio) for h in report.headlines]
"""
