//! The master's job store: every job, its state, placement and exit, in an embedded
//! SQLite database (rusqlite with its bundled SQLite), so that a master killed and
//! restarted knows every job.
//!
//! Contract:
//! * One table `jobs`; ids are assigned by SQLite, increasing, never reused. Every
//!   change is one statement, committed before the call returns (the database is in WAL
//!   mode with `synchronous=NORMAL`: a crash of the master loses no committed change; a
//!   crash of the machine may lose the last ones).
//! * States follow Slurm's letters ([`JobState`]); a finished job (CD, F, CA) never
//!   changes again — a late update of it is refused, not applied.
//! * Text read back that does not parse (a damaged row) is an error naming the job,
//!   never a panic.

use crate::matrix::Placement;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A job's state, with Slurm's letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// PD: waiting for a place in the matrix.
    Pending,
    /// R: its slot is the current one.
    Running,
    /// S: placed, its slot is switched out (halted and stopped).
    Suspended,
    /// CD: every rank exited 0.
    Completed,
    /// F: a rank failed, or its node went down.
    Failed,
    /// CA: cancelled.
    Cancelled,
}

impl JobState {
    /// Slurm's letters.
    pub fn code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completed => "CD",
            JobState::Failed => "F",
            JobState::Cancelled => "CA",
        }
    }

    /// The state of `code` (Slurm's letters).
    pub fn from_code(code: &str) -> Option<JobState> {
        Some(match code {
            "PD" => JobState::Pending,
            "R" => JobState::Running,
            "S" => JobState::Suspended,
            "CD" => JobState::Completed,
            "F" => JobState::Failed,
            "CA" => JobState::Cancelled,
            _ => return None,
        })
    }

    /// No further change: completed, failed or cancelled.
    pub fn finished(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }
}

/// One job as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    pub name: String,
    /// Ranks of the job.
    pub ranks: u32,
    /// Nodes it asked for.
    pub nodes: u32,
    /// The program and its arguments.
    pub argv: Vec<String>,
    pub state: JobState,
    /// Where it runs (placed jobs).
    pub placement: Option<Placement>,
    pub exit_code: Option<i32>,
    /// Why it failed or was cancelled, for `queue` and `logs`.
    pub message: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub submitted_ms: u64,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    /// The pid of the process that runs it (its launcher), once started.
    pub pid: Option<u32>,
}

/// One context switch and the time of each of its three stages (seed 001).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchRecord {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub from_slot: u32,
    pub to_slot: u32,
    /// Stage 1, halting the outgoing jobs' networks (the slowest job), microseconds.
    pub halt_us: u64,
    /// Stage 2, the buffer switch.
    pub switch_us: u64,
    /// Stage 3, releasing (or starting) the incoming jobs.
    pub release_us: u64,
    pub warning: Option<String>,
    /// Datagrams the outgoing jobs' links held when halted (moved out), and their bytes:
    /// the buffers' occupancy.
    #[serde(default)]
    pub datagrams: u64,
    #[serde(default)]
    pub bytes: u64,
}

/// Errors of the job store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("job database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("job {id}: damaged row: {what}")]
    Damaged { id: u64, what: String },
    #[error("job {0} does not exist")]
    NoSuchJob(u64),
    #[error("job {id} is already {state} and cannot change")]
    Finished { id: u64, state: &'static str },
}

/// The job store.
pub struct Store {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,
    ranks        INTEGER NOT NULL,
    nodes        INTEGER NOT NULL,
    argv         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    placement    TEXT,
    exit_code    INTEGER,
    message      TEXT,
    submitted_ms INTEGER NOT NULL,
    started_ms   INTEGER,
    ended_ms     INTEGER,
    pid          INTEGER
);
CREATE TABLE IF NOT EXISTS switches (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms        INTEGER NOT NULL,
    from_slot    INTEGER NOT NULL,
    to_slot      INTEGER NOT NULL,
    halt_us      INTEGER NOT NULL,
    switch_us    INTEGER NOT NULL,
    release_us   INTEGER NOT NULL,
    warning      TEXT,
    datagrams    INTEGER NOT NULL DEFAULT 0,
    bytes        INTEGER NOT NULL DEFAULT 0
);";

const COLUMNS: &str = "id, name, ranks, nodes, argv, state, placement, exit_code, message, \
                       submitted_ms, started_ms, ended_ms, pid";

impl Store {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Self::with(conn)
    }

    /// A store in memory (tests).
    pub fn in_memory() -> Result<Store, StoreError> {
        Self::with(Connection::open_in_memory()?)
    }

    fn with(conn: Connection) -> Result<Store, StoreError> {
        conn.execute_batch(SCHEMA)?;
        // A store of an earlier version lacks the switches' occupancy columns.
        for col in ["datagrams", "bytes"] {
            let has: bool = conn
                .prepare("SELECT 1 FROM pragma_table_info('switches') WHERE name = ?1")?
                .exists(params![col])?;
            if !has {
                conn.execute_batch(&format!(
                    "ALTER TABLE switches ADD COLUMN {col} INTEGER NOT NULL DEFAULT 0"
                ))?;
            }
        }
        Ok(Store { conn })
    }

    /// Records a new pending job; its id.
    pub fn submit(
        &self,
        name: &str,
        ranks: u32,
        nodes: u32,
        argv: &[String],
        now_ms: u64,
    ) -> Result<u64, StoreError> {
        let argv = serde_json::to_string(argv).unwrap_or_else(|_| "[]".into());
        self.conn.execute(
            "INSERT INTO jobs (name, ranks, nodes, argv, state, submitted_ms) \
             VALUES (?1, ?2, ?3, ?4, 'PD', ?5)",
            params![name, ranks, nodes, argv, now_ms as i64],
        )?;
        Ok(self.conn.last_insert_rowid() as u64)
    }

    /// The job `id`.
    pub fn get(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1");
        let raw = self
            .conn
            .query_row(&sql, params![id as i64], Raw::read)
            .optional()?;
        raw.map(Raw::parse).transpose()
    }

    /// Every job, by id.
    pub fn list(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.query(&format!("SELECT {COLUMNS} FROM jobs ORDER BY id"))
    }

    /// The jobs not finished yet (what a restarted master takes over), by id.
    pub fn unfinished(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.query(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE state IN ('PD', 'R', 'S') ORDER BY id"
        ))
    }

    fn query(&self, sql: &str) -> Result<Vec<JobRecord>, StoreError> {
        let mut st = self.conn.prepare(sql)?;
        let rows = st.query_map([], Raw::read)?;
        rows.map(|r| Raw::parse(r?)).collect()
    }

    /// Refuses a change to a finished (or missing) job.
    fn changeable(&self, id: u64) -> Result<JobRecord, StoreError> {
        let job = self.get(id)?.ok_or(StoreError::NoSuchJob(id))?;
        if job.state.finished() {
            return Err(StoreError::Finished {
                id,
                state: job.state.code(),
            });
        }
        Ok(job)
    }

    /// A pending job given its place in the matrix; it stays pending until it starts.
    pub fn assign(&self, id: u64, placement: &Placement) -> Result<(), StoreError> {
        self.changeable(id)?;
        let p = serde_json::to_string(placement).unwrap_or_default();
        self.conn.execute(
            "UPDATE jobs SET placement = ?2 WHERE id = ?1",
            params![id as i64, p],
        )?;
        Ok(())
    }

    /// Records a context switch.
    pub fn record_switch(&self, r: &SwitchRecord) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO switches (at_ms, from_slot, to_slot, halt_us, switch_us, release_us, \
             warning, datagrams, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                r.at_ms as i64,
                r.from_slot,
                r.to_slot,
                r.halt_us as i64,
                r.switch_us as i64,
                r.release_us as i64,
                r.warning,
                r.datagrams as i64,
                r.bytes as i64
            ],
        )?;
        Ok(())
    }

    /// The last `n` context switches, oldest first.
    pub fn switches(&self, n: u32) -> Result<Vec<SwitchRecord>, StoreError> {
        let mut st = self.conn.prepare(
            "SELECT at_ms, from_slot, to_slot, halt_us, switch_us, release_us, warning, \
             datagrams, bytes FROM (SELECT * FROM switches ORDER BY seq DESC LIMIT ?1) ORDER BY seq",
        )?;
        let rows = st.query_map(params![n], |r| {
            Ok(SwitchRecord {
                at_ms: r.get::<_, i64>(0)?.max(0) as u64,
                from_slot: r.get(1)?,
                to_slot: r.get(2)?,
                halt_us: r.get::<_, i64>(3)?.max(0) as u64,
                switch_us: r.get::<_, i64>(4)?.max(0) as u64,
                release_us: r.get::<_, i64>(5)?.max(0) as u64,
                warning: r.get(6)?,
                datagrams: r.get::<_, i64>(7)?.max(0) as u64,
                bytes: r.get::<_, i64>(8)?.max(0) as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A placed job started by process `pid`: running, with its placement, start time
    /// (the first time) and pid in one statement (a master that dies meanwhile leaves
    /// either all of it or none).
    pub fn start(
        &self,
        id: u64,
        placement: &Placement,
        pid: u32,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.changeable(id)?;
        let p = serde_json::to_string(placement).unwrap_or_default();
        self.conn.execute(
            "UPDATE jobs SET placement = ?2, state = 'R', pid = ?3, \
             started_ms = COALESCE(started_ms, ?4) WHERE id = ?1",
            params![id as i64, p, pid as i64, now_ms as i64],
        )?;
        Ok(())
    }

    /// A running job switched out (S) or in (R).
    pub fn set_state(&self, id: u64, state: JobState) -> Result<(), StoreError> {
        self.changeable(id)?;
        self.conn.execute(
            "UPDATE jobs SET state = ?2 WHERE id = ?1",
            params![id as i64, state.code()],
        )?;
        Ok(())
    }

    /// The job ended in `state` (CD, F or CA) with its exit code and a message.
    pub fn finish(
        &self,
        id: u64,
        state: JobState,
        exit_code: Option<i32>,
        message: Option<&str>,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.changeable(id)?;
        self.conn.execute(
            "UPDATE jobs SET state = ?2, exit_code = ?3, message = ?4, ended_ms = ?5 \
             WHERE id = ?1",
            params![id as i64, state.code(), exit_code, message, now_ms as i64],
        )?;
        Ok(())
    }
}

/// A row as read, before its text columns are parsed.
struct Raw {
    id: i64,
    name: String,
    ranks: i64,
    nodes: i64,
    argv: String,
    state: String,
    placement: Option<String>,
    exit_code: Option<i32>,
    message: Option<String>,
    submitted_ms: i64,
    started_ms: Option<i64>,
    ended_ms: Option<i64>,
    pid: Option<i64>,
}

impl Raw {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
        Ok(Raw {
            id: r.get(0)?,
            name: r.get(1)?,
            ranks: r.get(2)?,
            nodes: r.get(3)?,
            argv: r.get(4)?,
            state: r.get(5)?,
            placement: r.get(6)?,
            exit_code: r.get(7)?,
            message: r.get(8)?,
            submitted_ms: r.get(9)?,
            started_ms: r.get(10)?,
            ended_ms: r.get(11)?,
            pid: r.get(12)?,
        })
    }

    fn parse(self) -> Result<JobRecord, StoreError> {
        let id = self.id as u64;
        let damaged = |what: String| StoreError::Damaged { id, what };
        let state = JobState::from_code(&self.state)
            .ok_or_else(|| damaged(format!("state {:?}", self.state)))?;
        let argv: Vec<String> =
            serde_json::from_str(&self.argv).map_err(|e| damaged(format!("argv: {e}")))?;
        let placement = match self.placement {
            None => None,
            Some(p) => {
                Some(serde_json::from_str(&p).map_err(|e| damaged(format!("placement: {e}")))?)
            }
        };
        let count =
            |v: i64, what: &str| u32::try_from(v).map_err(|_| damaged(format!("{what} {v}")));
        Ok(JobRecord {
            id,
            name: self.name,
            ranks: count(self.ranks, "ranks")?,
            nodes: count(self.nodes, "nodes")?,
            argv,
            state,
            placement,
            exit_code: self.exit_code,
            message: self.message,
            submitted_ms: self.submitted_ms.max(0) as u64,
            started_ms: self.started_ms.map(|v| v.max(0) as u64),
            ended_ms: self.ended_ms.map(|v| v.max(0) as u64),
            pid: self.pid.and_then(|p| u32::try_from(p).ok()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv() -> Vec<String> {
        vec!["./jacobi".into(), "64".into()]
    }

    #[test]
    fn a_job_goes_from_pending_to_completed_and_stays_there() {
        let s = Store::in_memory().unwrap();
        let a = s.submit("jacobi", 8, 4, &argv(), 1000).unwrap();
        let b = s.submit("matmul", 4, 2, &argv(), 1001).unwrap();
        assert!(b > a);
        let j = s.get(a).unwrap().unwrap();
        assert_eq!(
            (j.state, j.ranks, j.nodes, j.argv),
            (JobState::Pending, 8, 4, argv())
        );
        let p = Placement {
            slot: 1,
            nodes: vec![0, 1, 2, 3],
        };
        s.start(a, &p, 42, 2000).unwrap();
        s.set_state(a, JobState::Suspended).unwrap();
        s.start(a, &p, 42, 3000).unwrap();
        let j = s.get(a).unwrap().unwrap();
        assert_eq!(j.placement, Some(p));
        assert_eq!(j.started_ms, Some(2000), "set at the first start only");
        s.finish(a, JobState::Completed, Some(0), None, 4000)
            .unwrap();
        assert!(matches!(
            s.set_state(a, JobState::Running),
            Err(StoreError::Finished { state: "CD", .. })
        ));
        assert!(matches!(
            s.set_state(99, JobState::Running),
            Err(StoreError::NoSuchJob(99))
        ));
        let ids: Vec<u64> = s.unfinished().unwrap().iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![b]);
        assert_eq!(s.list().unwrap().len(), 2);
    }

    #[test]
    fn a_reopened_store_knows_every_job() {
        let dir = std::env::temp_dir().join(format!("phalanx-gang-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jobs.db");
        let _ = std::fs::remove_file(&path);
        {
            let s = Store::open(&path).unwrap();
            let a = s.submit("a", 2, 1, &argv(), 1).unwrap();
            s.finish(a, JobState::Failed, Some(3), Some("node 2 down"), 5)
                .unwrap();
            s.submit("b", 2, 1, &argv(), 2).unwrap();
        }
        let s = Store::open(&path).unwrap();
        let jobs = s.list().unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].state, JobState::Failed);
        assert_eq!(jobs[0].message.as_deref(), Some("node 2 down"));
        assert_eq!(jobs[0].exit_code, Some(3));
        assert_eq!(jobs[1].state, JobState::Pending);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_of_the_earlier_version_is_migrated() {
        let dir = std::env::temp_dir().join(format!("phx-store-mig-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jobs.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE switches (seq INTEGER PRIMARY KEY AUTOINCREMENT, \
                 at_ms INTEGER NOT NULL, from_slot INTEGER NOT NULL, to_slot INTEGER NOT NULL, \
                 halt_us INTEGER NOT NULL, switch_us INTEGER NOT NULL, \
                 release_us INTEGER NOT NULL, warning TEXT); \
                 INSERT INTO switches (at_ms, from_slot, to_slot, halt_us, switch_us, \
                 release_us) VALUES (1, 0, 1, 10, 2, 3);",
            )
            .unwrap();
        let s = Store::open(&path).unwrap();
        let old = s.switches(10).unwrap();
        assert_eq!((old.len(), old[0].halt_us, old[0].datagrams), (1, 10, 0));
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn switches_are_recorded_in_order() {
        let s = Store::in_memory().unwrap();
        for i in 0..5u32 {
            s.record_switch(&SwitchRecord {
                at_ms: u64::from(i),
                from_slot: i,
                to_slot: i + 1,
                halt_us: 10,
                switch_us: 0,
                release_us: 5,
                warning: None,
                datagrams: 0,
                bytes: 0,
            })
            .unwrap();
        }
        let last: Vec<u32> = s.switches(3).unwrap().iter().map(|r| r.from_slot).collect();
        assert_eq!(last, vec![2, 3, 4]);
    }

    #[test]
    fn a_damaged_row_is_an_error_naming_the_job() {
        let s = Store::in_memory().unwrap();
        let a = s.submit("a", 2, 1, &argv(), 1).unwrap();
        s.conn
            .execute(
                "UPDATE jobs SET state = 'ZZ' WHERE id = ?1",
                params![a as i64],
            )
            .unwrap();
        let e = s.get(a).unwrap_err().to_string();
        assert!(e.contains(&format!("job {a}")) && e.contains("ZZ"), "{e}");
    }
}
