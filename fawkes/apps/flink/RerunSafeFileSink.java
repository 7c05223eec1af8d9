// The lab Flink jobs' file sink (kind flink-hdfs; tests and the lab only): one file per writing task,
// "part-NNNNN" (its subtask index), written under a hidden name of its attempt and renamed over the final name
// once its input has ended, so that a task run again writes the same file again instead of a second one.
//
// Why not Flink's FileSink: in BATCH mode a TaskManager lost under a running job (fawkes' FP removal of a
// flink-hdfs node) restarts the failed region, the regions that produced its lost inputs and every consumer of
// those (Flink's region failover), finished ones included: a writing task that had already committed its part
// file (named by a fresh UUID per attempt) commits a second one, and its words are counted twice (the
// conformance kit saw it on 2026-11-27: 'w20': 1654 against 827).
package fawkes.apps;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.UUID;

import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.core.fs.FSDataOutputStream;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;

public class RerunSafeFileSink implements Sink<String> {
    private final String dir;

    public RerunSafeFileSink(String dir) {
        this.dir = dir;
    }

    @Override
    public SinkWriter<String> createWriter(WriterInitContext ctx) throws IOException {
        TaskInfo t = ctx.getTaskInfo();
        return new Writer(new Path(dir), t.getIndexOfThisSubtask(), t.getAttemptNumber());
    }

    static class Writer implements SinkWriter<String> {
        private final FileSystem fs;
        private final Path dir;
        private final Path tmp;
        private final Path target;
        private final String mine;
        private FSDataOutputStream out;

        Writer(Path dir, int subtask, int attempt) throws IOException {
            this.dir = dir;
            this.fs = dir.getFileSystem();
            this.mine = String.format(".part-%05d.", subtask);
            this.tmp = new Path(dir, mine + "attempt-" + attempt + "-" + UUID.randomUUID());
            this.target = new Path(dir, String.format("part-%05d", subtask));
            fs.mkdirs(dir);
            this.out = fs.create(tmp, FileSystem.WriteMode.NO_OVERWRITE);
        }

        @Override
        public void write(String line, Context context) throws IOException {
            out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public void flush(boolean endOfInput) throws IOException {
            if (!endOfInput || out == null) {
                return;
            }
            out.close();
            out = null;
            if (fs.exists(target) && !fs.delete(target, false)) {
                throw new IOException("cannot replace " + target);
            }
            if (!fs.rename(tmp, target)) {
                throw new IOException("cannot rename " + tmp + " to " + target);
            }
            // what earlier attempts of this task left (a killed one's hidden file): gone
            FileStatus[] left = fs.listStatus(dir);
            for (FileStatus s : left == null ? new FileStatus[0] : left) {
                if (s.getPath().getName().startsWith(mine)) {
                    fs.delete(s.getPath(), false);
                }
            }
        }

        @Override
        public void close() throws IOException {
            if (out != null) {  // failed or cancelled before its input ended: nothing of it stays
                out.close();
                out = null;
                fs.delete(tmp, false);
            }
        }
    }
}
