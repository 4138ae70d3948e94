//! `sluice-controller`: the controller's commands (issue 9).

fn main() {
    eprintln!("sluice-controller: not built yet (issue 9)");
    std::process::exit(2);
}
