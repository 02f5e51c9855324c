# mlcc-slot.ccp: the per-flow datapath program of ccp-agent (portus 0.9 datapath language).
#
# Loaded by `ccp-agent run` from this file (option `program` of agent.toml); lines whose first
# non-blank character is '#' are comments, removed by the agent before it compiles the program.
#
# Every ACK accumulates the slot's measurements; once per slot (Control.slot_us microseconds,
# set by the agent to its --slot-ms when it installs the program) it reports them and starts a
# new slot. The ACK that leaves nothing in flight reports at once as well (and starts a new
# slot): the program runs only on ACKs, so without it the last bytes of a burst would wait in
# the datapath until the next burst's first ACK -- for a training job, into the next iteration,
# where the agent would count them as that iteration's progress. Report fields (acked, lost and micros are reset after each report):
#   acked     bytes acknowledged during the slot                  (Ack.bytes_acked summed)
#   lost      packets lost during the slot                        (Ack.lost_pkts_sample summed)
#   rtt       latest RTT sample, microseconds                     (Flow.rtt_sample_us)
#   rin       delivery rate, bytes/s                              (Flow.rate_incoming)
#   rout      sending rate, bytes/s                               (Flow.rate_outgoing)
#   rate      the pacing rate in force, bytes/s                   (Rate)
#   micros    length of the reported slot, microseconds           (Micros)
#   now       the datapath's clock at the reporting ACK, us          (Ack.now; the agent calibrates
#             it against its own clock to date the report's bytes)
#   ssthresh  the window's slow-start threshold, bytes; cap_seen  the last Control.cwnd_cap seen;
#   cut_us    Ack.now of the last window reduction (state of the window rule below, reported
#             only because a program's persistent registers are Report registers)
# The agent applies its per-slot rate by setting the implicit register `Rate` (bytes/s) and the
# window's ceiling `Control.cwnd_cap` (bytes: about a quarter slot of that rate, see the agent's
# `paced_cwnd_bytes`) with UPDATE_FIELDS. Within the ceiling the window follows Reno (RFC 5681):
# halved on loss, at most once per RTT (one reduction per window of data, as RFC 6582's
# recovery), then slow start below ssthresh and one segment per RTT above it; a raised ceiling
# (a higher planned rate) restarts slow start toward it. The halving has to be the program's: the
# kernel's loss recovery (PRR) sets the window only while it lasts, and afterwards tcp_mltcp
# restores the program's last `Cwnd` (it is what the module reports as the flow's window). So while the agents' plans fit the
# links, the rate limits and the window never does; where they do not (an agent that does not see
# the other senders into a port, or a flow left unthrottled), the flows back off as TCP does
# instead of overflowing the queue. Without this rule (the window fixed at the ceiling), ccp-agent's
# NIC-only run of ci/scenarios/agent.toml dropped 8381-9702 packets per run at the bottleneck where
# cubic dropped 141 (guest time, 20 iterations, 2026-11-26).
#
# Scavenger mode (`Control.scavenge_us` > 0, set by the agent for a flow its policy holds back
# when `[sched] held_flows = "scavenger"`; the agent then leaves `Rate` at the line rate): the
# window follows LEDBAT ("Low Extra Delay Background Transport", RFC 6817, Sec. 2.4.2) instead
# of Reno. Per ACK, with queuing_delay = Flow.rtt_sample_us - base delay (its least value over
# the flow's life; the RFC keeps minima over the last 10 minutes; tcp_mltcp's Flow.rtt_sample_us
# is the smoothed RTT, srtt, so both terms are smoothed alike),
#   cwnd += GAIN * (TARGET - queuing_delay) / TARGET * bytes_newly_acked * MSS / cwnd
# with GAIN 1 and TARGET = Control.scavenge_us, written as two rules (the language has no
# negative numbers): growth below the target, shrinkage above it down to MIN_CWND = 2 segments.
# So a held flow sends what the served flows leave of the port and backs off as soon as they
# queue, instead of idling at the rate floor. Loss halves it as above (RFC 6817: "at least as
# fast as TCP"). Entering scavenger mode starts it from at most LEDBAT's INIT_CWND (2 segments):
# a flow the agent takes the port from yields it within an RTT. Leaving it (the flow is served
# again) restarts slow start toward the ceiling, as a raised ceiling does. Report fields:
#   base_rtt   least RTT sample, us (2^31 - 1, the largest immediate, before the first; a
#   missing sample reads as 2^32 - 1 and is skipped); qdelay  latest queuing delay, us; scav_seen  the last
#   Control.scavenge_us seen (state of the mode switch).
(def
    (volatile Report.acked 0)
    (volatile Report.lost 0)
    (Report.rtt 0)
    (Report.rin 0)
    (Report.rout 0)
    (Report.rate 0)
    (volatile Report.micros 0)
    (Report.now 0)
    (Report.ssthresh 0)
    (Report.cap_seen 0)
    (Report.cut_us 0)
    (Report.base_rtt 2147483647)
    (Report.qdelay 0)
    (Report.scav_seen 0)
    (Control.slot_us 60000)
    (Control.cwnd_cap 16777216)
    (Control.scavenge_us 0)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.rin Flow.rate_incoming)
    (:= Report.rout Flow.rate_outgoing)
    (:= Report.rate Rate)
    (:= Report.now Ack.now)
    (:= Report.ssthresh (if (> Control.cwnd_cap Report.cap_seen) Control.cwnd_cap))
    (:= Report.cap_seen Control.cwnd_cap)
    (:= Report.base_rtt (min Report.base_rtt Flow.rtt_sample_us))
    (:= Report.qdelay (if (< Flow.rtt_sample_us 2147483647) (- Flow.rtt_sample_us Report.base_rtt)))
    (fallthrough)
)
# Scavenger mode switch: entering starts from at most 2 segments; leaving restarts slow start.
(when (> Control.scavenge_us Report.scav_seen)
    (:= Cwnd (min Cwnd 2896))
    (fallthrough)
)
(when (> Report.scav_seen Control.scavenge_us)
    (:= Report.ssthresh Control.cwnd_cap)
    (fallthrough)
)
(when true
    (:= Report.scav_seen Control.scavenge_us)
    (fallthrough)
)
# Loss: halve the window (to no less than 4 segments of 1448 bytes, never raising a smaller
# scavenger window), once per RTT.
(when (&& (> Ack.lost_pkts_sample 0) (> (- Ack.now Report.cut_us) Flow.rtt_sample_us))
    (:= Report.ssthresh (max (/ Cwnd 2) 5792))
    (:= Cwnd (min Cwnd Report.ssthresh))
    (:= Report.cut_us Ack.now)
    (fallthrough)
)
# Slow start below ssthresh, additive increase (1448 bytes per window acknowledged) above it.
(when (&& (== Control.scavenge_us 0) (< Cwnd Report.ssthresh))
    (:= Cwnd (+ Cwnd Ack.bytes_acked))
    (fallthrough)
)
(when (&& (== Control.scavenge_us 0) (< Report.ssthresh (+ Cwnd 1)))
    (:= Cwnd (+ Cwnd (/ (* 1448 Ack.bytes_acked) (max Cwnd 1))))
    (fallthrough)
)
# LEDBAT below the target: grow by (TARGET - queuing_delay) / TARGET segments per window.
(when (> Control.scavenge_us Report.qdelay)
    (:= Cwnd (+ Cwnd (/ (* (* 1448 Ack.bytes_acked) (- Control.scavenge_us Report.qdelay)) (* Control.scavenge_us (max Cwnd 1)))))
    (fallthrough)
)
# LEDBAT above the target: shrink by (queuing_delay - TARGET) / TARGET segments per window,
# to no less than 2 segments.
(when (&& (> Control.scavenge_us 0) (> Report.qdelay Control.scavenge_us))
    (:= Cwnd (max (- Cwnd (min Cwnd (/ (* (* 1448 Ack.bytes_acked) (- Report.qdelay Control.scavenge_us)) (* Control.scavenge_us (max Cwnd 1))))) 2896))
    (fallthrough)
)
(when true
    (:= Cwnd (min Cwnd Control.cwnd_cap))
    (fallthrough)
)
(when (> Micros Control.slot_us)
    (:= Report.micros Micros)
    (report)
    (:= Micros 0)
)
(when (&& (== Flow.packets_in_flight 0) (> Report.acked 0))
    (:= Report.micros Micros)
    (report)
    (:= Micros 0)
)
