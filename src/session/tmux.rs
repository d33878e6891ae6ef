//! tmux session backend. (Implemented by the sessions work.)
