package android.content.res;
public class AssetFileDescriptor implements java.io.Closeable {
  private final java.io.RandomAccessFile file; private final long length;
  AssetFileDescriptor(java.io.RandomAccessFile file, long length) { this.file = file; this.length = length; }
  public java.io.FileDescriptor getFileDescriptor() throws java.io.IOException { return file.getFD(); }
  public long getStartOffset() { return 0; }
  public long getDeclaredLength() { return length; }
  public void close() throws java.io.IOException { file.close(); }
}
