"""What local-sync and local-task share (IREE's hal/local): host memory (allocator.py), CPU kernel
libraries (executable.py), recorded commands and copies and fills (command_buffer.py), their
execution (device.py), timed submissions (timing.py) and the C library calls under them
(symbols.py). The two drivers differ only in how a submission is scheduled and how a dispatch's
workgroups are spread over threads; each is a package of its own beside this one."""
