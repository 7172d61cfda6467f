//! An in-process Redis: RESP over an in-memory stream to the real `redis`
//! client, the project's real Lua scripts run in Lua 5.1.
