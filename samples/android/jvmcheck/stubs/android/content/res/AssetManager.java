package android.content.res;
// Stub: serves the files of the folder named by -Dassets.dir (the real one reads the APK).
public class AssetManager {
  private static java.io.File file(String n) { return new java.io.File(System.getProperty("assets.dir"), n); }
  public java.io.InputStream open(String n) throws java.io.IOException { return new java.io.FileInputStream(file(n)); }
  public AssetFileDescriptor openFd(String n) throws java.io.IOException {
    java.io.RandomAccessFile f = new java.io.RandomAccessFile(file(n), "r");
    return new AssetFileDescriptor(f, f.length());
  }
}
