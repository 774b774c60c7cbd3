import Foundation
import Postgres
import RecordsProtocol

// MARK: - Group commit: SAVEs of several sessions in one transaction

extension DatabaseWork {
    /// The most SAVEs `runSaves` puts in one transaction.
    public static var savesInAGroup: Int { SaveGroup.maxMembers }

    /// Runs SAVEs of several sessions (each with `save`, all with the same `saveGroupKey`):
    /// those that commit in one round trip as one transaction, the rest one by one; the
    /// results in the order of `works`.
    /// `skipping`: SAVEs (by index) cancelled since the group began, not run again alone.
    public static func runSaves(_ works: [DatabaseWork], _ context: WorkContext, skipping: (Int) -> Bool = { _ in false }) -> [WorkResult] {
        guard works.count > 1, let first = works.first, let model = first.save?.model,
              works.allSatisfy({ $0.saveGroupKey != nil && $0.saveGroupKey == first.saveGroupKey }) else { return works.map { $0.run(context) } }
        let started = Date()
        context.identity = first.identity
        do {
            try context.retryingOnce { try context.assumeIdentity() }
        } catch {
            return works.map { $0.run(context) }  // each answers the failure as it would alone
        }
        let results = context.runSaves(works.map { $0.save!.plan }, model: model, skipping: skipping)
        let seconds = Date().timeIntervalSince(started)
        return zip(works, results).map { work, result in
            let answer = work.save!.finish(result)
            work.counted?(Finished(reply: answer.reply, seconds: seconds))  // committed, whether or not its client is still there
            return answer
        }
    }
}

/// A SAVE as its plan and what its result answers. A class: a plan is large, and every
/// command's `Step` (an INSERT line's included) is as large as its largest case.
final class GroupableSave: Sendable {
    let plan: SavePlan
    let model: Model
    let finish: @Sendable (SaveResult) -> WorkResult

    init(plan: SavePlan, model: Model, finish: @escaping @Sendable (SaveResult) -> WorkResult) {
        self.plan = plan
        self.model = model
        self.finish = finish
    }
}

/// See `DatabaseWork.saveGroupKey`.
public struct SaveGroupKey: Hashable, Sendable {
    let identity: Identity
    let model: ObjectIdentifier
}
