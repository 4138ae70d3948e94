//! The Kubernetes-facing model the agent and the controller share (issue 9).
