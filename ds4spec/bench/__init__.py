"""``ds4spec bench``: plain decoding against each speculative mode on the bench workloads (``command``,
``modes``, ``workloads``, inputs in ``data/``), other systems run beside it (``peers``, ``peer_runs``,
``systems``), and charts (``plots``)."""
