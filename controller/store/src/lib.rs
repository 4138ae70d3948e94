//! The controller's store (issue 9).
