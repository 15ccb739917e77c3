//! `phalanx`: the launcher binary. Thin: parse the command line, run, exit with the code.
//!
//! Modules: [`args`] (command line), [`job`] (rendezvous, supervision, teardown), [`spawn`]
//! (rank processes), [`output`] (line forwarding), [`signals`] (self-pipe), [`status`]
//! (exit-status wording).

mod args;
mod job;
mod output;
mod signals;
mod spawn;
mod status;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let code = match cli.command {
        args::Command::Run(run) => job::run(run.into_config()),
    };
    std::process::exit(code);
}
