"""Records what every rank of a torch.distributed program does, for meshsim to check together.

`python -m meshsim_record --world-size N -o DIR -- train.py ARGS...` runs the program once per
rank with a recording process-group backend, and writes one Flight Recorder dump per rank (JSON,
schema 2.10) that `meshsim fr analyze DIR` and `meshsim fr to-scenario DIR` read.
"""

__version__ = "0.1.0"
