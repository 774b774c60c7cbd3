import Dispatch

/// A task executor whose jobs wait, after its first one, for `seconds`: a program whose
/// cooperative threads are all busy, at a chosen point (after a call's first step, before its
/// continuation). Runs its jobs one at a time on a queue of its own.
final class HeldExecutor: TaskExecutor, @unchecked Sendable {  // `ran` touched only on `queue`
    private let queue = DispatchQueue(label: "HeldExecutor")
    private let seconds: Double
    private var ran = 0

    init(holdingAfterTheFirstJobFor seconds: Double) { self.seconds = seconds }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { [self] in
            job.runSynchronously(on: asUnownedTaskExecutor())
            ran += 1
            guard ran == 1 else { return }
            queue.suspend()  // the next jobs wait; this one has finished
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [queue] in queue.resume() }
        }
    }
}
