"""The speculative core: a prompt in, a stream of events out (``events``), plain (``plain``) or speculative
(``speculative``), with alignment of drafted text (``align``), verification (``verify``), sampling and statistics.
``contracts`` and ``drafting`` say what the loop needs from a target, a drafter and a policy. The core imports no
other layer of ds4spec: backends, drafters and policies implement its contracts."""
