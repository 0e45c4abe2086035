// The fleet's claims of submit request ids (issue 27 §1, docs/fleet.md "Idempotent fleet
// submit"): one run per (uid, request_id) across every host. The requests bucket holds, per
// claimed id, the run id its first submitter chose and the digest of the spec it was made with
// (the one-host ledger's digest: SHA-256 of the spec's canonical JSON); the bucket's max age is
// runs.request_id_retention_s.
//
// A claim is a create-only put, made after the run id is chosen and before the spec is queued:
// exactly one submitter wins a key, however many hosts are asked at once. The claim is not undone
// by a later failure of placement: a retry of the same id and spec gets the claimed run id back
// and queues the spec again under it (placement is idempotent per run id: the message id, the
// runs bucket's create-only record, the placing host's registry), so an id whose first queueing
// failed is healed by its retry, never stranded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

struct RequestClaim {
  std::string run_id;
  std::string spec_sha256;
};

// The bucket key of (uid, request_id): a request id may hold '.' (a subject's token separator)
// and ':' (not a key character), so the key is the SHA-256 (hex) of "<uid>:<request_id>".
std::string request_claim_key(std::uint32_t uid, const std::string& request_id);

// Claims (uid, request_id) for `mine`: nullopt when this submitter holds the claim (made now, or
// made before by this same submit, its reply lost), else the claim another submit holds.
NatsResult<std::optional<RequestClaim>> claim_request(FleetLink& link, std::uint32_t uid, const std::string& request_id,
                                                      const RequestClaim& mine);

// The claim of (uid, request_id) as the bucket's stream leader has it (nullopt: none).
NatsResult<std::optional<RequestClaim>> read_request_claim(FleetLink& link, std::uint32_t uid,
                                                           const std::string& request_id);

}  // namespace mh::fleet
