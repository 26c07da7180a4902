"""Training the explanation adapter (`make adapter`); not part of the service or its tests.

OpenMP threads wait for each other passively here. Its default is to spin, and on a
two-core machine that other processes share, a spinning thread whose partner was
descheduled burns the core the partner needs: measured on this project's host under
load, one LoRA step took 4 to 6 times the CPU time with spinning threads (16-25 s
against 4-5 s). The setting must be in the environment before torch starts OpenMP,
which is why it is set on importing this package rather than in the training code.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
