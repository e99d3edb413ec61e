"""The model store: manifests of known models (``manifests``), where they come from (``sources``, ``derive``),
and the models on this machine, pulled, verified and resolved by name (``local``)."""
