// The meeting point every backend shares: per-group sequence numbers, the signature check the
// moment ranks meet, park and wake, what each parked rank waits for (hang reports), and one error
// delivered to every member. What a complete meeting computes is the executor's business.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/site_divergence.hpp"
#include "sim/runtime/world.hpp"
#include "src/comm/rank_list.hpp"
#include "src/fnv1a.hpp"

namespace meshsim::sim {

// A collective whose participants disagree on the signature.
struct DesyncRecord {
  std::string group;     // what reports call it (group_label.hpp)
  std::string channel;   // the same, with the direction of a send/recv: "WORLD p2p 0→1"
  std::string group_id;  // c10d's name
  int64_t seq = 0;
  std::vector<int64_t> members;
  std::vector<std::pair<int64_t, Signature>> arrivals;  // in rank order
};

// A collective some rank is parked in: who arrived (with what) and who has not.
struct OpenWait {
  std::string group;     // what reports call it (group_label.hpp)
  std::string channel;   // the same, with the direction of a send/recv: "WORLD p2p 0→1"
  std::string group_id;  // c10d's name
  RankList members;
  int64_t seq = 0;
  Signature signature;  // of the lowest parked rank
  std::vector<int64_t> arrived;
  std::vector<int64_t> missing;
  // new_group barrier: what the lowest parked rank is creating ("world.tp: 2 groups of 2 ...").
  std::string creating;
  // Send/recv: the calls its sender and receiver posted on this channel, and where the last pair
  // that met was called (line 0 when none has).
  int64_t group_number = 0;  // the group's id (Group::id)
  CallSite site;             // where the lowest parked rank called it
  int64_t sends_posted = 0;
  int64_t recvs_posted = 0;
  CallSite matched_send;
  CallSite matched_recv;
};

class Rendezvous {
 public:
  Rendezvous(World& world, std::vector<RankActivity>& activity);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Rank `rank` enters its next collective on `group` (group.position must be its own) with
  // `signature` and its call's `buffers`; parks until every member has arrived and `executor` has
  // run, then returns (its results written through `buffers`) or throws the meeting's error. Throws
  // RuntimeError, before meeting anyone, for a rank outside the group or a group whose members
  // differ from the other members' view. A meeting whose members disagree on the signature (a
  // desync) is recorded and never completes: its ranks stay parked until the world aborts them
  // (RankAborted). Six arguments, all in registers: a backend's call can jump here instead of
  // keeping its own frame on every parked rank's stack.
  void meet(int64_t rank, const Group& group, const Signature& signature,
            const CallBuffers& buffers, Executor& executor);
  // The same for new_group's store barrier: `request` is what this rank creates.
  void meet_store(int64_t rank, const Group& group, const Signature& signature,
                  const NewGroupRequest& request, Executor& executor);
  // The same for a send (rank == src) or recv (rank == dst): the n-th message from src to dst
  // within `group` meets the n-th receive.
  void meet_pair(int64_t rank, int64_t src, int64_t dst, const Group& group,
                 const Signature& signature, const CallBuffers& buffers, Executor& executor);

  // Names groups in reports from now on (null: c10d's names).
  void set_group_table(const GroupTable* groups) { groups_ = groups; }
  // What reports call group `id` (group_label.hpp).
  std::string group_label(int64_t id) const;
  // Every group a collective was called on (new_group's store left out), by id, with all its
  // members, those that never called it too.
  std::vector<std::pair<int64_t, RankList>> collective_groups() const;

  // Every meeting whose members disagreed, in the order the disagreement was seen (at most
  // kMaxDesyncs; each is a hang of its own, and they may be independent).
  static constexpr size_t kMaxDesyncs = 64;
  const std::vector<DesyncRecord>& desyncs() const { return desyncs_; }
  // Each group's first meeting whose members came from different call sites (collectives and
  // group creation; a send and its recv differ by nature), the open meetings' as far as members
  // arrived; in schedule order.
  std::vector<SiteDivergence> site_divergences() const;
  // What `rank` is parked in, if anything.
  std::optional<WaitInfo> wait_of(int64_t rank) const;
  // Every meeting with a parked rank, ordered by its lowest parked rank; `wait_of[r]` is the
  // index of rank r's entry, or -1.
  std::vector<OpenWait> open_waits(std::vector<int64_t>& wait_of) const;

 private:
  // A group's (or one send/recv direction's) meetings, in sequence order.
  struct Channel {
    RankList members;
    std::vector<int64_t> last_seq;  // by position
    std::deque<Meeting*> open;      // sequence numbers base, base + 1, ...
    int64_t base = 1;
    std::optional<SiteDivergence> divergence;  // the first complete one
    CallSite matched[2];                       // send/recv: the last pair's sites, by position
    SharedSignature last_signature[2];         // the newest meeting's (send/recv: by position)
  };
  [[noreturn]] static void refuse_outsider(int64_t rank, const Group& group,
                                           const Signature& signature);
  Channel& channel(const Group& group);
  Channel& pair_channel(int64_t rank, const Group& group, int64_t src, int64_t dst);
  Channel& lookup_pair_channel(const Group& group, int64_t src, int64_t dst);
  // The caller's buffers go straight into the meeting's slot: an exchange built on the stack
  // first was two more cache lines of every parked rank's stack per call. Inlined into each
  // entry: every frame between a rank's step and its park is stack that call reloads.
  [[gnu::always_inline]] inline void enter_and_wait(int64_t rank, Channel& channel, size_t pos,
                                                    const Group& group, const Signature& signature,
                                                    const CallBuffers& buffers,
                                                    const NewGroupRequest* new_group,
                                                    Executor& executor, bool point_to_point);
  Meeting& meeting_at(Channel& channel, int64_t seq, const Group& group, bool point_to_point);
  // Where member `pos` of `m` called it from: its rank's site, which does not move while the
  // rank is in the meeting (woken or not) nor after it is aborted there. Reports read an open
  // meeting's sites only while its members are in it; a complete meeting's divergence is
  // described once, as its last member arrives.
  const CallSite& site_of(const Meeting& m, size_t pos) const {
    return activity_[static_cast<size_t>((*m.members)[pos])].site;
  }
  void record_desync(const Meeting& m);
  void note_divergence(Channel& channel, const Meeting& m);
  SiteDivergence describe_sites(const Meeting& m) const;
  void complete(Meeting& m, Executor& executor);
  void leave(int64_t rank, Channel& channel, Meeting& m, size_t pos);

  World& world_;
  std::vector<RankActivity>& activity_;
  std::vector<std::unique_ptr<Channel>> channels_;  // by group id + 1 (the store is -1)
  // One direction of a send/recv pair: (group id, src, dst).
  using PairKey = std::tuple<int64_t, int64_t, int64_t>;
  struct PairKeyHash {
    size_t operator()(const PairKey& k) const {
      const int64_t words[] = {std::get<0>(k), std::get<1>(k), std::get<2>(k)};
      return static_cast<size_t>(fnv1a_words(words));
    }
  };
  // Hashed: a world of a million ranks has millions of directions, and a tree's walk through
  // them missed the cache at every level.
  std::unordered_map<PairKey, Channel, PairKeyHash> pairs_;
  RankListPool pair_members_;
  // Each rank's last few send/recv directions (channels in pairs_ never move).
  struct RecentPairs {
    static constexpr size_t kEntries = 4;
    struct Entry {
      int64_t group_id = 0;
      int64_t src = 0;
      int64_t dst = 0;
      Channel* channel = nullptr;
    };
    std::array<Entry, kEntries> entries{};
    size_t next = 0;
  };
  std::vector<RecentPairs> pair_cache_;             // by rank, once any rank sends or receives
  std::vector<std::unique_ptr<Meeting>> meetings_;  // every meeting ever opened, for reuse
  std::vector<Meeting*> spare_;
  struct Parked {
    Meeting* meeting = nullptr;
    size_t pos = 0;
  };
  std::vector<Parked> parked_;  // by rank
  const GroupTable* groups_ = nullptr;
  std::vector<DesyncRecord> desyncs_;
  std::vector<const Meeting*> desynced_;  // the meetings desyncs_ describe (they never recycle)
};

}  // namespace meshsim::sim
