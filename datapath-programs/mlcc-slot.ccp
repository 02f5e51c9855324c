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
    (Control.slot_us 60000)
    (Control.cwnd_cap 16777216)
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
    (fallthrough)
)
# Loss: halve the window (at least 4 segments of 1448 bytes), once per RTT.
(when (&& (> Ack.lost_pkts_sample 0) (> (- Ack.now Report.cut_us) Flow.rtt_sample_us))
    (:= Report.ssthresh (max (/ Cwnd 2) 5792))
    (:= Cwnd Report.ssthresh)
    (:= Report.cut_us Ack.now)
    (fallthrough)
)
# Slow start below ssthresh, additive increase (1448 bytes per window acknowledged) above it.
(when (< Cwnd Report.ssthresh)
    (:= Cwnd (+ Cwnd Ack.bytes_acked))
    (fallthrough)
)
(when (< Report.ssthresh (+ Cwnd 1))
    (:= Cwnd (+ Cwnd (/ (* 1448 Ack.bytes_acked) (max Cwnd 1))))
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
