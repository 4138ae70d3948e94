//! What the program decided, and why (the why feeds the metrics).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Continue with the (possibly rewritten) frame; the node kernel routes it.
    Pass,
    Drop,
    /// The frame is ready for a pod's link (MACs set, TTL spent): send it
    /// there, past the node's routing (see [`crate::maps::LocalLink`]).
    Redirect {
        ifindex: u32,
    },
}

impl Verdict {
    /// One of each kind, for counters.
    pub const KINDS: [Verdict; 3] = [
        Verdict::Pass,
        Verdict::Drop,
        Verdict::Redirect { ifindex: 0 },
    ];

    /// Metric label.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass => "verdict_pass",
            Verdict::Drop => "verdict_drop",
            Verdict::Redirect { .. } => "verdict_redirect",
        }
    }

    /// Its counter's index in the events counters, after the events'.
    #[inline(always)]
    pub fn counter_index(&self) -> u32 {
        Event::COUNT as u32
            + match self {
                Verdict::Pass => 0,
                Verdict::Drop => 1,
                Verdict::Redirect { .. } => 2,
            }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub event: Event,
}

macro_rules! events {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// What happened to a frame; one metrics counter each.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Event {
            $($(#[$doc])* $v,)*
        }

        impl Event {
            pub const ALL: &'static [Event] = &[$(Event::$v,)*];
            pub const COUNT: usize = Event::ALL.len();

            /// Metric label.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Event::$v => $name,)*
                }
            }

            /// Dense index, for per-event counter arrays.
            #[inline(always)]
            pub fn index(&self) -> usize {
                *self as usize
            }
        }
    };
}

events! {
    /// Not IPv4/IPv6: passed untouched.
    NotIp => "not_ip",
    /// IP but not a protocol or header layout the program translates.
    Unhandled => "unhandled",
    /// No service and no translated flow matched: passed untouched.
    NotService => "not_service",
    /// An IP fragment: dropped if aimed at a VIP, else passed.
    Fragment => "fragment",
    /// Truncated or inconsistent headers: dropped if aimed at a VIP, else passed.
    Malformed => "malformed",
    /// A reply of a translated flow, reverse-translated.
    ReplyNat => "reply_nat",
    /// A packet of an existing flow to a VIP, translated as before.
    Established => "established",
    /// A new flow to a VIP: endpoint chosen, conntrack created, translated.
    NewFlow => "new_flow",
    /// TCP to a VIP with nothing to serve: answered with a reset (P6).
    Reset => "reset",
    /// UDP to a VIP with nothing to serve: answered with port unreachable (P6).
    Unreachable => "unreachable",
    /// Nothing to serve and no answer possible (a reset, other protocols): dropped.
    NoEndpoint => "no_endpoint",
    /// Every SNAT port tried was taken: dropped.
    NoSnatPort => "no_snat_port",
    /// `Cluster` flow but the node has no address of the packet's family: dropped.
    NoNodeAddr => "no_node_addr",
    /// The chosen endpoint's family differs from the packet's: dropped.
    BadEndpoint => "bad_endpoint",
    /// Conntrack refused the entry: dropped.
    CtFull => "ct_full",
    /// Arrived at an ingress hook addressed to another host's MAC (the
    /// kernel's `PACKET_OTHERHOST`, as a bridge floods unknown unicast):
    /// passed untouched, for the node's stack to drop.
    OtherHost => "other_host",
    /// Sent by a pod from an address it does not own (another pod's, the
    /// node's, a client's, a VIP): dropped at `FromPod`, so a pod can
    /// neither forge replies of other pods' translated flows nor have the
    /// node forward traffic in someone else's name.
    Spoofed => "spoofed",
    /// A TCP reset or FIN on a tracked flow whose sequence numbers are not
    /// acceptable (RFC 5961): the flow is left as it was; dropped, or, for
    /// a reset within the window, passed for the endpoint to answer with a
    /// challenge ACK. Named after conntrack's `invalid` count (Cilium's
    /// `CT: Invalid`), what a blind spoofer's resets and FINs show up as.
    CtInvalid => "ct_invalid",
}
