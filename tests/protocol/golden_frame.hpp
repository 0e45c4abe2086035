// The reference frame vector (§7.3/§7.4), shared by the frame, command and CLI tests.
#pragma once

#include <string_view>

namespace mh::protocol::golden {

// The canonical bytes the digest is taken over, and the digest the reference pins.
inline constexpr std::string_view kCanonicalFrame =
    R"({"entities":null,"handoff":{"handoff":"none"},"next":[],"node":{"id":"implement"},"obligations":[{"asked_by":null,"text":"the suite is red before the implementation"}],"operations":[{"op":"dir.list"},{"op":"file.edit"},{"op":"file.read"},{"op":"file.write"},{"op":"search"},{"op":"shell"},{"op":"skill.load"}],"prior":[],"reaching":[{"asked_by":null,"text":"to verify: the suite is green"}],"step":{"attempt":1,"index":2,"state":"implement","workflow":"development/default"},"workflow":{"id":"development/default","version":"1"}})";
inline constexpr std::string_view kFrameDigest = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12";
// SHA-256 of the golden document file (metaharness-frame-canonical.json).
inline constexpr std::string_view kFrameDocumentSha =
    "ef897a58a624848aad942d69d2745b431f2eaad5180cd0f5b2e1c8975adcb93b";

// The golden document itself: pretty, sorted keys, trailing newline.
inline constexpr std::string_view kFrameDocument = R"({
  "digest": "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12",
  "entities": null,
  "format": "metaharness.frame/1",
  "handoff": {
    "handoff": "none"
  },
  "next": [],
  "node": {
    "id": "implement"
  },
  "obligations": [
    {
      "asked_by": null,
      "text": "the suite is red before the implementation"
    }
  ],
  "operations": [
    {
      "op": "dir.list"
    },
    {
      "op": "file.edit"
    },
    {
      "op": "file.read"
    },
    {
      "op": "file.write"
    },
    {
      "op": "search"
    },
    {
      "op": "shell"
    },
    {
      "op": "skill.load"
    }
  ],
  "prior": [],
  "reaching": [
    {
      "asked_by": null,
      "text": "to verify: the suite is green"
    }
  ],
  "step": {
    "attempt": 1,
    "index": 2,
    "state": "implement",
    "workflow": "development/default"
  },
  "workflow": {
    "id": "development/default",
    "version": "1"
  }
}
)";

// The frame as an embedded JSON object (a frame.set command's `frame`): canonical form plus
// `digest` and `format`, keys sorted.
inline constexpr std::string_view kSealedFrameObject =
    R"({"digest":"43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12","entities":null,"format":"metaharness.frame/1","handoff":{"handoff":"none"},"next":[],"node":{"id":"implement"},"obligations":[{"asked_by":null,"text":"the suite is red before the implementation"}],"operations":[{"op":"dir.list"},{"op":"file.edit"},{"op":"file.read"},{"op":"file.write"},{"op":"search"},{"op":"shell"},{"op":"skill.load"}],"prior":[],"reaching":[{"asked_by":null,"text":"to verify: the suite is green"}],"step":{"attempt":1,"index":2,"state":"implement","workflow":"development/default"},"workflow":{"id":"development/default","version":"1"}})";

}  // namespace mh::protocol::golden
