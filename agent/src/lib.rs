//! The Sluice node agent.
