#include "sim/runtime/rendezvous.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/group_label.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

// Point-to-point partners only agree on the tensor; collectives on everything.
bool compatible(const Signature& a, const Signature& b) {
  const bool p2p = (a.op == CollectiveOp::kSend || a.op == CollectiveOp::kRecv) &&
                   (b.op == CollectiveOp::kSend || b.op == CollectiveOp::kRecv);
  if (p2p) return a.op != b.op && a.dtype == b.dtype && a.shape == b.shape;
  return a == b;
}

// Refusals, kept out of the frames of meet and meet_pair, which every parked rank's stack holds.
[[noreturn]] __attribute__((noinline)) void refuse_pair_outside(int64_t src, int64_t dst,
                                                                const Group& group,
                                                                const Signature& signature) {
  throw runtime_error(fmt::format("{} between ranks {} and {}: both must be in group {}",
                                  collective_op_name(signature.op), src, dst,
                                  display_group(group.name)));
}

[[noreturn]] __attribute__((noinline)) void refuse_other_members(
    const Group& group, const std::vector<int64_t>& first_members) {
  throw runtime_error(fmt::format(
      "group {} has members [{}] on this rank but [{}] on the ranks that used it first",
      display_group(group.name), fmt::join(*group.ranks, ", "), fmt::join(first_members, ", ")));
}

}  // namespace

Rendezvous::Rendezvous(World& world, std::vector<RankActivity>& activity)
    : world_(world), activity_(activity), parked_(static_cast<size_t>(world.size())) {}

Rendezvous::~Rendezvous() = default;

Rendezvous::Channel& Rendezvous::channel(const Group& group) {
  const auto index = static_cast<size_t>(group.id + 1);
  if (index >= channels_.size()) channels_.resize(index + 1);
  std::unique_ptr<Channel>& slot = channels_[index];
  if (!slot) {
    slot = std::make_unique<Channel>();
    slot->members = group.ranks;
    slot->last_seq.assign(group.ranks->size(), 0);
  } else if (slot->members != group.ranks && *slot->members != *group.ranks) {
    // Ranks that passed other members under the same name see different groups (new_group
    // warned); a collective on it cannot be met.
    refuse_other_members(group, *slot->members);
  }
  return *slot;
}

Rendezvous::Channel& Rendezvous::pair_channel(int64_t rank, const Group& group, int64_t src,
                                              int64_t dst) {
  // The rank's own few directions first: a pipeline stage sends and receives on the same four,
  // and a miss in the world-wide table costs a cache miss or two per call.
  if (pair_cache_.empty()) pair_cache_.resize(static_cast<size_t>(world_.size()));
  RecentPairs& recent = pair_cache_[static_cast<size_t>(rank)];
  for (const RecentPairs::Entry& e : recent.entries) {
    if (e.channel != nullptr && e.group_id == group.id && e.src == src && e.dst == dst)
      return *e.channel;
  }
  Channel& found = lookup_pair_channel(group, src, dst);
  recent.entries[recent.next] = {group.id, src, dst, &found};
  recent.next = (recent.next + 1) % RecentPairs::kEntries;
  return found;
}

Rendezvous::Channel& Rendezvous::lookup_pair_channel(const Group& group, int64_t src, int64_t dst) {
  auto [it, fresh] = pairs_.try_emplace({group.id, src, dst});
  if (fresh) {
    const int64_t pair[] = {std::min(src, dst), std::max(src, dst)};
    it->second.members = pair_members_.intern(pair);
    it->second.last_seq.assign(2, 0);
  }
  return it->second;
}

Meeting& Rendezvous::meeting_at(Channel& channel, int64_t seq, const Group& group,
                                bool point_to_point) {
  while (channel.base + static_cast<int64_t>(channel.open.size()) <= seq) {
    Meeting* m = nullptr;
    if (spare_.empty()) {
      meetings_.push_back(std::make_unique<Meeting>());
      m = meetings_.back().get();
    } else {
      m = spare_.back();
      spare_.pop_back();
    }
    // Reused meetings keep their buffers: no allocation per rank in steady state.
    m->group_id = group.id;
    m->group = group.name;
    m->groups = groups_;
    m->seq = channel.base + static_cast<int64_t>(channel.open.size());
    m->members = channel.members;
    m->point_to_point = point_to_point;
    m->differing.clear();
    // Every member's exchange was reset to its arrival as it left; only that is undone here.
    m->exchanges.resize(channel.members->size());
    for (Exchange& e : m->exchanges) e.arrived = false;
    m->new_groups.clear();
    m->arrived = m->first = m->collected = 0;
    m->done = m->desynced = m->sites_differ = false;
    m->failure = nullptr;
    m->errors.clear();
    m->leaves_at.reset();
    m->shared_output.reset();
    channel.open.push_back(m);
  }
  return *channel.open[static_cast<size_t>(seq - channel.base)];
}

__attribute__((noinline)) void Rendezvous::refuse_outsider(int64_t rank, const Group& group,
                                                           const Signature& signature) {
  throw runtime_error(fmt::format("rank {} called {} on group {} ({}) without being a member", rank,
                                  collective_op_name(signature.op), group.name,
                                  fmt::join(*group.ranks, ", ")));
}

inline void Rendezvous::enter_and_wait(int64_t rank, Channel& channel, size_t pos,
                                       const Group& group, const Signature& signature,
                                       const CallBuffers& buffers, const NewGroupRequest* new_group,
                                       Executor& executor, bool point_to_point) {
  RankActivity& me = activity_[static_cast<size_t>(rank)];
  if (signature.op != CollectiveOp::kNewGroup) me.history.make_room();
  const int64_t seq = ++channel.last_seq[pos];
  Meeting& m = meeting_at(channel, seq, group, point_to_point);
  ++me.meetings_entered;
  me.last_seq = seq;
  // The signature this rank's record holds: the meeting's, shared by every member that agrees,
  // and by the meetings after it on this channel while they repeat it (send/recv: per side).
  const auto repeated = [&](SharedSignature& last) -> const SharedSignature& {
    if (!last || !(*last == signature)) last = SharedSignature(signature);
    return last;
  };
  SharedSignature held;
  if (m.arrived == 0) {
    m.first = pos;
    m.signature = signature;
    m.shared_signature = repeated(channel.last_signature[point_to_point ? pos : 0]);
    held = m.shared_signature;
  } else if (m.signature == signature) {
    held = m.shared_signature;
  } else {
    m.desynced = m.desynced || !compatible(m.signature, signature);
    m.differing.emplace(pos, signature);
    held = point_to_point ? repeated(channel.last_signature[pos]) : SharedSignature(signature);
  }
  if (m.arrived != 0) {
    // One comparison per arrival; the first such meeting of a group is described once.
    m.sites_differ = m.sites_differ || (!point_to_point && !(site_of(m, m.first) == me.site));
  }
  if (signature.op != CollectiveOp::kNewGroup) {
    me.history.enter(group.id, seq, point_to_point ? (*m.members)[1 - pos] : -1, std::move(held),
                     me.site, me.clock);
    me.calls.add(me.site, signature.op);
    if (me.counting) me.issued.issued(group.id, signature.op);
  }
  Exchange& mine = m.exchanges[pos];
  static_cast<CallBuffers&>(mine) = buffers;
  mine.arrived = true;
  mine.arrived_at = me.clock;
  if (new_group != nullptr) {
    if (m.new_groups.empty()) m.new_groups.assign(m.size(), nullptr);
    m.new_groups[pos] = new_group;
  }
  ++m.arrived;
  if (m.sites_differ && m.arrived == m.size() && !channel.divergence) {
    note_divergence(channel, m);
  }
  if (point_to_point && !m.desynced && m.arrived == m.size()) {
    channel.matched[0] = site_of(m, 0);
    channel.matched[1] = site_of(m, 1);
  }
  if (m.desynced) record_desync(m);
  parked_[static_cast<size_t>(rank)] = {&m, pos};
  if (!m.desynced && m.arrived == m.size()) complete(m, executor);
  if (!m.done) {
    me.state = RankActivity::State::kBlocked;
    try {
      world_.park(rank);  // throws RankAborted when the world gives up on this rank
    } catch (...) {
      m.forget_frame(pos);  // the frame unwinds: nothing may point into it any more
      if (signature.op != CollectiveOp::kNewGroup)
        me.history.settle(CollectiveRecord::State::kAborted);
      throw;
    }
    me.state = RankActivity::State::kRunning;
  }
  leave(rank, channel, m, pos);
}

void Rendezvous::meet(int64_t rank, const Group& group, const Signature& signature,
                      const CallBuffers& buffers, Executor& executor) {
  if (group.position < 0) refuse_outsider(rank, group, signature);
  enter_and_wait(rank, channel(group), static_cast<size_t>(group.position), group, signature,
                 buffers, nullptr, executor, false);
}

void Rendezvous::meet_store(int64_t rank, const Group& group, const Signature& signature,
                            const NewGroupRequest& request, Executor& executor) {
  if (group.position < 0) refuse_outsider(rank, group, signature);
  enter_and_wait(rank, channel(group), static_cast<size_t>(group.position), group, signature,
                 CallBuffers{}, &request, executor, false);
}

void Rendezvous::meet_pair(int64_t rank, int64_t src, int64_t dst, const Group& group,
                           const Signature& signature, const CallBuffers& buffers,
                           Executor& executor) {
  if (group.group_rank(src) < 0 || group.group_rank(dst) < 0)
    refuse_pair_outside(src, dst, group, signature);
  Channel& c = pair_channel(rank, group, src, dst);
  enter_and_wait(rank, c, rank == std::min(src, dst) ? 0 : 1, group, signature, buffers, nullptr,
                 executor, true);
}

void Rendezvous::leave(int64_t rank, Channel& channel, Meeting& m, size_t pos) {
  parked_[static_cast<size_t>(rank)] = {};
  RankActivity& me = activity_[static_cast<size_t>(rank)];
  if (m.leaves_at) me.clock = *m.leaves_at;
  if (m.shared_output) {
    const Exchange& e = m.exchanges[pos];
    // In place (all_reduce, broadcast), with every member's signature alike: the output already
    // has the result's dtype and shape.
    const bool in_place = e.output == e.input && m.differing.empty();
    if (e.output != nullptr && !(in_place && e.output->adopt_values(*m.shared_output)))
      *e.output = *m.shared_output;
  }
  m.forget_frame(pos);
  // Copied out before the meeting can be recycled; nothing to copy on the common path.
  std::exception_ptr failure;
  std::string error;
  if (m.failure) failure = m.failure;
  if (!m.errors.empty()) {
    if (const auto it = m.errors.find(pos); it != m.errors.end()) error = it->second;
  }
  if (m.signature.op != CollectiveOp::kNewGroup) {
    me.history.settle(failure || !error.empty() ? CollectiveRecord::State::kFailed
                                                : CollectiveRecord::State::kCompleted);
  }
  if (++m.collected == m.size()) {
    m.shared_output.reset();  // its storage goes as soon as no member needs it
    // Meetings of a channel complete in sequence order, so the finished one is at the front.
    while (!channel.open.empty() &&
           channel.open.front()->collected == channel.open.front()->size()) {
      spare_.push_back(channel.open.front());
      channel.open.pop_front();
      ++channel.base;
    }
  }
  if (failure) std::rethrow_exception(failure);
  if (!error.empty()) throw runtime_error(error);
}

// Cold, and kept out of the caller's frame, which every parked rank's stack holds.
__attribute__((noinline)) void Rendezvous::record_desync(const Meeting& m) {
  // Later arrivals at a desynced meeting complete its record.
  const auto known = std::find(desynced_.begin(), desynced_.end(), &m);
  if (known == desynced_.end() && desyncs_.size() == kMaxDesyncs) return;
  DesyncRecord record{meeting_group_label(m), meeting_label(m), m.group, m.seq, *m.members, {}};
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.exchanges[i].arrived) record.arrivals.emplace_back((*m.members)[i], m.signature_of(i));
  }
  std::sort(record.arrivals.begin(), record.arrivals.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (known == desynced_.end()) {
    desynced_.push_back(&m);
    desyncs_.push_back(std::move(record));
  } else {
    desyncs_[static_cast<size_t>(known - desynced_.begin())] = std::move(record);
  }
}

void Rendezvous::complete(Meeting& m, Executor& executor) {
  try {
    executor.execute(m);
  } catch (...) {
    forget_unwound_frames();
    m.failure = std::current_exception();
  }
  m.done = true;
  for (int64_t member : *m.members) {
    if (world_.is_parked(member)) world_.wake(member);
  }
}

// Cold, and kept out of the caller's frame, which every parked rank's stack holds.
__attribute__((noinline)) void Rendezvous::note_divergence(Channel& channel, const Meeting& m) {
  channel.divergence = describe_sites(m);
}

SiteDivergence Rendezvous::describe_sites(const Meeting& m) const {
  SiteDivergence d;
  d.group_id = m.group_id;
  d.seq = m.seq;
  d.signature = m.signature;
  d.entered_at = m.exchanges[m.first].arrived_at;
  d.complete = m.arrived == m.size();
  for (size_t i = 0; i < m.size(); ++i) {
    const Exchange& e = m.exchanges[i];
    const int64_t rank = (*m.members)[i];
    if (!e.arrived) {
      d.missing.push_back(rank);
      continue;
    }
    d.entered_at = std::min(d.entered_at, e.arrived_at);
    const CallSite& site = site_of(m, i);
    const auto same = std::find_if(d.sites.begin(), d.sites.end(),
                                   [&](const auto& s) { return s.first == site; });
    if (same != d.sites.end()) {
      same->second.push_back(rank);  // members are in rank order
    } else if (d.sites.size() < SiteDivergence::kMaxSites) {
      d.sites.push_back({site, {rank}});
    } else {
      d.elsewhere.push_back(rank);
    }
  }
  std::stable_sort(d.sites.begin(), d.sites.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second.size(), a.second.front()) <
           std::pair(b.second.size(), b.second.front());
  });
  return d;
}

std::vector<SiteDivergence> Rendezvous::site_divergences() const {
  std::vector<SiteDivergence> out;
  for (const std::unique_ptr<Channel>& c : channels_) {
    if (!c) continue;
    if (c->divergence) {
      out.push_back(*c->divergence);
      continue;
    }
    for (const Meeting* m : c->open) {
      if (m->sites_differ) {
        out.push_back(describe_sites(*m));
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Rendezvous::group_label(int64_t id) const {
  return sim::group_label(groups_, id, std::to_string(id));
}

std::vector<std::pair<int64_t, RankList>> Rendezvous::collective_groups() const {
  std::vector<std::pair<int64_t, RankList>> out;
  for (size_t i = 1; i < channels_.size(); ++i) {
    if (channels_[i]) out.emplace_back(static_cast<int64_t>(i) - 1, channels_[i]->members);
  }
  return out;
}

std::optional<WaitInfo> Rendezvous::wait_of(int64_t rank) const {
  const Parked& p = parked_[static_cast<size_t>(rank)];
  if (p.meeting == nullptr || !world_.is_parked(rank)) return std::nullopt;
  const Meeting& m = *p.meeting;
  std::optional<int64_t> peer;
  if (m.point_to_point) peer = (*m.members)[1 - p.pos];
  return WaitInfo{meeting_label(m), m.members, m.seq, m.signature_of(p.pos), peer};
}

std::vector<OpenWait> Rendezvous::open_waits(std::vector<int64_t>& wait_of) const {
  wait_of.assign(static_cast<size_t>(world_.size()), -1);
  std::vector<OpenWait> out;
  std::map<const Meeting*, int64_t> index_of;
  for (int64_t rank = 0; rank < world_.size(); ++rank) {
    const Parked& p = parked_[static_cast<size_t>(rank)];
    if (p.meeting == nullptr || !world_.is_parked(rank)) continue;
    auto [it, fresh] = index_of.emplace(p.meeting, static_cast<int64_t>(out.size()));
    if (fresh) {
      const Meeting& m = *p.meeting;
      // The signature of the lowest parked rank (ranks are visited in order).
      OpenWait w{meeting_group_label(m),
                 meeting_label(m),
                 m.group,
                 m.members,
                 m.seq,
                 m.signature_of(p.pos),
                 {},
                 {},
                 {},
                 m.group_id,
                 site_of(m, p.pos),
                 0,
                 0,
                 {},
                 {}};
      if (!m.new_groups.empty() && m.new_groups[p.pos] != nullptr) {
        const NewGroupRequest& asked = *m.new_groups[p.pos];
        const GroupBatch& batch = **asked.batch;
        w.creating = fmt::format("{}{} {}", asked.origin ? *asked.origin : "new_group",
                                 batch.count() > 1 ? "'s" : "", batch.describe());
        if (asked.operation != nullptr && !asked.operation->empty())
          w.creating += " for " + *asked.operation;
      }
      for (size_t i = 0; i < m.size(); ++i) {
        (m.exchanges[i].arrived ? w.arrived : w.missing).push_back((*m.members)[i]);
      }
      if (m.point_to_point) {
        const bool sends = m.signature_of(p.pos).op == CollectiveOp::kSend;
        const int64_t me = (*m.members)[p.pos], peer = (*m.members)[1 - p.pos];
        const int64_t src = sends ? me : peer, dst = sends ? peer : me;
        const auto pair = pairs_.find({m.group_id, src, dst});
        if (pair != pairs_.end()) {
          const Channel& c = pair->second;
          const size_t src_pos = src < dst ? 0 : 1;
          w.sends_posted = c.last_seq[src_pos];
          w.recvs_posted = c.last_seq[1 - src_pos];
          w.matched_send = c.matched[src_pos];
          w.matched_recv = c.matched[1 - src_pos];
        }
      }
      std::sort(w.arrived.begin(), w.arrived.end());
      std::sort(w.missing.begin(), w.missing.end());
      out.push_back(std::move(w));
    }
    wait_of[static_cast<size_t>(rank)] = it->second;
  }
  return out;
}

}  // namespace meshsim::sim
