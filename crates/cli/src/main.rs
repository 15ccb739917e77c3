//! `phalanx`: the launcher binary. Thin: parse the command line, run, exit with the code.
//!
//! Modules: [`slurm`] (`phalanx run` inside a Slurm allocation), [`args`] (command line), [`agents`] (ranks started by node daemons and ssh proxies), [`serve`] (the agent side), [`proxy`] (`phalanx proxy`, a host's agent over ssh), [`hosts`] (hostfiles, placement), [`job`] (rendezvous, supervision, teardown), [`spawn`]
//! (rank processes), [`output`] (line forwarding), [`signals`] (self-pipe), [`status`]
//! (exit-status wording), [`cc`] (`phalanx cc`, the
//! mpicc of the C ABI), [`gang`] (`phalanx gang`, the job manager).

mod agents;
mod args;
mod bounds;
mod cc;
mod cost;
mod gang;
mod hosts;
mod job;
mod job_stats;
mod job_trace;
mod output;
mod proxy;
mod rendezvous;
mod serve;
mod signals;
mod slurm;
mod spawn;
mod status;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let code = match cli.command {
        args::Command::Run(run) => {
            let status_file = run.status_file.clone();
            let code = match run.use_slurm() {
                Ok(true) => match run.into_srun() {
                    Ok(job) => slurm::run(job),
                    Err(e) => {
                        eprintln!("phalanx: {e}");
                        2
                    }
                },
                Ok(false) => match run.into_config() {
                    Ok(cfg) => job::run(cfg),
                    Err(e) => {
                        eprintln!("phalanx: {e}");
                        2
                    }
                },
                Err(e) => {
                    eprintln!("phalanx: {e}");
                    2
                }
            };
            if let Some(f) = status_file {
                // Written whole under another name, then renamed: a reader never sees
                // half a code.
                let tmp = f.with_extension("tmp");
                if std::fs::write(&tmp, code.to_string()).is_ok() {
                    let _ = std::fs::rename(&tmp, &f);
                }
            }
            code
        }
        args::Command::Cc { args } => cc::run(args),
        args::Command::Proxy => proxy::run(),
        args::Command::Gang(g) => gang::run(g),
    };
    std::process::exit(code);
}
