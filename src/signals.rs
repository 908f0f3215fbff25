//! The signals that end a run (SIGINT, SIGTERM, SIGHUP, SIGQUIT), registered before anything
//! starts so that one arriving during start-up still ends the run cleanly: the recording
//! complete, the terminal restored.

/// Registered shutdown signals.
pub struct Shutdown {
    #[cfg(unix)]
    signals: [tokio::signal::unix::Signal; 4],
}

impl Shutdown {
    /// Registers the handlers now.
    pub fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                signals: [
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::hangup())?,
                    signal(SignalKind::quit())?,
                ],
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// Resolves when one of the signals arrives; returns its name.
    pub async fn wait(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            let [int, term, hup, quit] = &mut self.signals;
            tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
                _ = quit.recv() => "SIGQUIT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
