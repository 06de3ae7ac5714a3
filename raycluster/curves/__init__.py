"""Curves a person can look at: every logged step's loss, throughput and hardware, and the run's events
(checkpoints published, restarts, resumes, interruptions), kept with trackio on the driver's node, drawn
as a PNG at the end and published beside the checkpoints while the run goes on."""
