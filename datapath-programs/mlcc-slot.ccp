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
# The agent applies its per-slot rate by setting the implicit register `Rate` (bytes/s) with
# UPDATE_FIELDS; Cwnd is opened once at install so that the rate, not the window, limits.
(def
    (volatile Report.acked 0)
    (volatile Report.lost 0)
    (Report.rtt 0)
    (Report.rin 0)
    (Report.rout 0)
    (Report.rate 0)
    (volatile Report.micros 0)
    (Report.now 0)
    (Control.slot_us 60000)
)
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.rin Flow.rate_incoming)
    (:= Report.rout Flow.rate_outgoing)
    (:= Report.rate Rate)
    (:= Report.now Ack.now)
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
