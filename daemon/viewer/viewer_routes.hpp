// The viewer on the [http] listener (docs/viewer.md): the page (/viewer, its script and style) and
// the four API routes it calls, each with the page's token as `Authorization: Bearer`:
//
//   GET  /viewer/api/runs                          the run summaries `list` gives, and the token's role
//   GET  /viewer/api/run?run_id=R                  one summary, its pending decisions, can_decide
//   GET  /viewer/api/events?run_id=R&from_seq=N    the stream from N: what exists, or a wait of up
//        [&wait_ms=M]                              to M ms (at most 20 s) for the next line
//   POST /viewer/api/decide {run_id, call_id, decision}
//                                                  a tool.decide for the run (control, on one's own
//                                                  runs; admin, on any), answered with its result
//
// Refusals are JSON {code, reason} with a status that says the kind: 401 UNAUTHORIZED (no token,
// or one the daemon does not know or that has expired), 403 FORBIDDEN (the token's role does not
// reach), 404 UNKNOWN_RUN, 400 MALFORMED. The page itself carries nothing secret and is served to
// anyone; what it shows comes only through the API.
#pragma once

#include <memory>
#include <vector>

#include "daemon/http/http_listener.hpp"

namespace mh::daemon {

class Server;

std::vector<http::Route> viewer_routes(std::shared_ptr<Server> server);

}  // namespace mh::daemon
