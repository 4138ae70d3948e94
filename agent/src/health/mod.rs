//! kube-proxy-compatible health endpoints (spec H1–H5).
//!
//! Two kinds of server, both answered from one shared state:
//!
//! * the **node server** (TCP 10256 by default): `/healthz` and `/livez`.
//!   Both report whether the datapath is in sync (or the oldest pending update
//!   is younger than the health timeout, 2 × sync period by default);
//!   `/healthz` also fails while the node is being deleted or carries the
//!   `ToBeDeletedByClusterAutoscaler` taint, `/livez` ignores that. This is
//!   the check a load balancer runs for `externalTrafficPolicy: Cluster` (H2).
//! * one **service server** per distinct `healthCheckNodePort` of a `Local`
//!   Service (H3): 200 only when this node has at least one ready,
//!   non-terminating endpoint of the Service and the datapath is healthy;
//!   every path and method gets that answer, as kube-proxy's does.
//!
//! A `Local` Service without a `healthCheckNodePort` (the API server always
//! allocates one, a hand-written state file may not) has no port of its own;
//! H3 says its check then goes to 10256. `/healthz` there keeps its node
//! meaning, because Cluster Services share it, so the node server also
//! answers `/service/<namespace>/<name>` with that Service's H3 answer. It is
//! an addition: kube-proxy answers 404 on that path.
//!
//! Layout: [`logic`] is the pure decision code (clock passed in), [`entries`]
//! turns a [`crate::state::DesiredState`] into per-Service entries, [`http`]
//! is a small HTTP/1.1 reader/writer, [`requests`] routes a parsed request to
//! its answer and holds the state answers read, [`budget`] is each
//! listener's connection budget and the pure choice of which connection
//! gives way, [`listener`] accepts and serves connections, and [`handle`]
//! runs it all on a dedicated thread (so a slow sync loop never delays a
//! health answer) and opens and closes the per-Service servers.

pub mod budget;
pub mod entries;
pub mod handle;
pub mod http;
mod listener;
pub mod logic;
mod requests;
pub mod time;

pub use budget::{Deadline, ListenerCounters, ListenerKind, ShedReason};
pub use entries::{local_endpoint_count, service_health_entries, ServiceHealthEntry};
pub use handle::{HealthConfig, HealthCounters, HealthHandle, Limits, SetServicesReport};
pub use logic::{
    node_eligible, Clock, IpFamily, ManualClock, ProxierHealth, SystemClock,
    DEFAULT_NODE_HEALTH_PORT, TO_BE_DELETED_TAINT,
};
pub use requests::{NodeCounters, ServiceCounters};
