"""The judge: verdicts decided on the trusted side from a dead child's reported facts and saved outputs.

``judge`` turns a ``check`` run into a verdict; ``timed`` rechecks the saved outputs of timed calls;
``compare`` holds the tolerances; ``gradients`` and ``training`` judge a backward; ``matching`` finds the
built-in task a by-path problem computes, through the reshapes of ``match_adapters``; ``tolerances`` puts
KernelBench's criterion beside ours; ``adversarial`` runs the manifest of reward hacks.
"""
